"""Local tokenizers built on the fly with the ``tokenizers`` package (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tunegate.workload.prompts import WORDS


@pytest.fixture()
def word_tokenizer_path(tmp_path: Path) -> Path:
    """A WordLevel tokenizer: every built-in word is exactly one token."""
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture()
def subword_tokenizer_path(tmp_path: Path) -> Path:
    """A tiny byte-level BPE: most words split into several tokens, like real tokenizers."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([" ".join(WORDS)] * 3, trainer=trainer)
    path = tmp_path / "bpe" / "tokenizer.json"
    path.parent.mkdir()
    tok.save(str(path))
    return path
