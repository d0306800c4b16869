"""Random-weight Llama-architecture GGUF models, written at test time (never downloaded).

A model is a :class:`ModelSpec` (sizes, dtype, seed); the file is cached under
``<cache>/models/<name>-<hash>.gguf`` where the hash covers every parameter and
:data:`GENERATOR_VERSION`, so changing either writes a new file and the same spec always reuses
the one on disk. Writing is atomic (temp file, then rename), so parallel test workers never read
half a model.

The vocabulary is SentencePiece style (``tokenizer.ggml.model = "llama"``): ``<unk>``, ``<s>``,
``</s>``, the ChatML markers, the 256 ``<0xNN>`` byte tokens, single characters, and every
prefix of ``▁word`` for each word of :data:`tunegate.workload.prompts.WORDS`. So llama.cpp's
SPM tokenizer merges each of tunegate's synthetic prompt words into one token, and a prompt of N
words is N tokens plus BOS.

Random weights would sample byte tokens (invalid UTF-8 fragments) and end-of-generation tokens
as often as words. To make every generated piece a word, hidden dimension 0 is held at a
constant positive value (set in every token embedding, never written by any layer's output
projection), and the output rows of the byte, special and control tokens read only that
dimension with a large negative weight: their logits are always far below the words'.

Example:
    >>> from tunegate.testing.gguf_models import MODELS, ensure_model
    >>> path = ensure_model(MODELS["tiny"])  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from tunegate.testing.cache import cache_root
from tunegate.workload.prompts import WORDS

__all__ = [
    "BENCH",
    "CHAT_TEMPLATE",
    "GENERATOR_VERSION",
    "MODELS",
    "TINY",
    "ModelSpec",
    "Vocabulary",
    "build_vocabulary",
    "ensure_model",
    "write_model",
]

GENERATOR_VERSION = 1
"""Bump when the written bytes change for the same spec (invalidates cached files)."""

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML; llama.cpp recognises it with or without ``--jinja``."""

_SPACE = "\u2581"  # SentencePiece's word-boundary marker "▁"
_SPECIAL = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")
_UNK, _BOS, _EOS = 0, 1, 2
_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'-"
_SUPPRESSED_LOGIT_WEIGHT = -30.0
_WORD_LOGIT_STD = 3.0


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Sizes of a generated Llama model.

    Attributes:
        name: Short name used in the file name (``tiny``, ``bench``).
        hidden: Embedding width (``llama.embedding_length``).
        layers: Transformer blocks.
        heads: Attention heads (``hidden`` must divide evenly).
        kv_heads: Key/value heads (grouped-query attention when fewer than ``heads``).
        ffn: Feed-forward width.
        context: Training context length (``llama.context_length``, the server's default ``-c``).
        dtype: ``f32`` or ``f16`` for the 2-D weights (norms are always f32).
        seed: Seed of the random weights.
    """

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    context: int = 2048
    dtype: Literal["f32", "f16"] = "f32"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: hidden {self.hidden} must divide into heads "
                             f"{self.heads}, and heads into kv_heads {self.kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def key(self) -> str:
        """12 hex digits of a hash over every field, the vocabulary and the generator version."""
        payload = json.dumps({**dataclasses.asdict(self), "generator": GENERATOR_VERSION,
                              "words": list(WORDS)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def file_name(self) -> str:
        return f"{self.name}-{self.dtype}-{self.key()}.gguf"

    def parameter_count(self) -> int:
        """Weights in the file (embeddings, blocks, norms and the output matrix)."""
        vocab = len(build_vocabulary().tokens)
        kv = self.kv_heads * self.head_dim
        block = (2 * self.hidden * self.hidden + 2 * self.hidden * kv  # q, o, k, v
                 + 3 * self.hidden * self.ffn + 2 * self.hidden)       # gate, up, down, norms
        return 2 * vocab * self.hidden + self.layers * block + self.hidden


TINY = ModelSpec("tiny", hidden=256, layers=4, heads=4, kv_heads=4, ffn=768, context=2048)
"""About 3.9 M parameters (15.5 MB, f32): starts in well under a second; for fast tests.

Not smaller on purpose: with about 1 M parameters a token took 0.2 ms here and llama-server
delivered all 16 tokens of a reply in one burst (TTFT = E2EL for the client); at this size
tokens take about 2 ms and arrive one by one."""

BENCH = ModelSpec("bench", hidden=512, layers=8, heads=8, kv_heads=8, ffn=1376, context=4096)
"""About 26 M parameters (104 MB, f32): big enough that prefill per token is cheaper than decode
per token and that slots (``-np``), threads and batch sizes change throughput."""

MODELS: dict[str, ModelSpec] = {"tiny": TINY, "bench": BENCH}


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """An SPM vocabulary as GGUF stores it (parallel lists).

    Attributes:
        tokens: Token pieces (``▁`` marks a leading space).
        scores: Merge priority (higher merges first).
        types: ``gguf.TokenType`` values.
        suppressed: Ids that must never be sampled (special, control and byte tokens).
    """

    tokens: tuple[str, ...]
    scores: tuple[float, ...]
    types: tuple[int, ...]
    suppressed: tuple[int, ...]


def build_vocabulary() -> Vocabulary:
    """Special tokens, 256 byte tokens, single characters and every prefix of ``▁word``."""
    from gguf import TokenType

    tokens: list[str] = list(_SPECIAL)
    types: list[int] = [TokenType.UNKNOWN, *[TokenType.CONTROL] * (len(_SPECIAL) - 1)]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [TokenType.BYTE] * 256
    suppressed = tuple(range(len(tokens)))
    pieces: dict[str, None] = dict.fromkeys([_SPACE, *_CHARS])
    for word in WORDS:
        marked = _SPACE + word
        pieces.update(dict.fromkeys(marked[:end] for end in range(2, len(marked) + 1)))
    tokens += list(pieces)
    types += [TokenType.NORMAL] * len(pieces)
    scores = [0.0] * (len(_SPECIAL) + 256) + [float(len(p)) for p in pieces]
    return Vocabulary(tuple(tokens), tuple(scores), tuple(int(t) for t in types), suppressed)


def _weights(spec: ModelSpec, vocab: Vocabulary) -> dict[str, npt.NDArray[np.float32]]:
    """Tensors in numpy layout ``(out, in)``; GGUF reverses the shape on write."""
    rng = np.random.default_rng(spec.seed)
    h, f, n_vocab = spec.hidden, spec.ffn, len(vocab.tokens)
    kv = spec.kv_heads * spec.head_dim

    def normal(rows: int, cols: int, std: float) -> npt.NDArray[np.float32]:
        return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)

    ones = np.ones(h, dtype=np.float32)
    embed = normal(n_vocab, h, 1.0)
    embed[:, 0] = 1.0  # the constant "bias" dimension
    tensors = {"token_embd.weight": embed, "output_norm.weight": ones}
    residual_std = 1.0 / np.sqrt(2.0 * spec.layers)  # keeps the residual stream near unit scale
    for i in range(spec.layers):
        out_proj = normal(h, h, residual_std / np.sqrt(h))
        down = normal(h, f, residual_std / np.sqrt(f))
        out_proj[0, :] = 0.0  # no layer writes the bias dimension
        down[0, :] = 0.0
        tensors |= {
            f"blk.{i}.attn_norm.weight": ones,
            f"blk.{i}.attn_q.weight": normal(h, h, 1.0 / np.sqrt(h)),
            f"blk.{i}.attn_k.weight": normal(kv, h, 1.0 / np.sqrt(h)),
            f"blk.{i}.attn_v.weight": normal(kv, h, 1.0 / np.sqrt(h)),
            f"blk.{i}.attn_output.weight": out_proj,
            f"blk.{i}.ffn_norm.weight": ones,
            f"blk.{i}.ffn_gate.weight": normal(f, h, 1.0 / np.sqrt(h)),
            f"blk.{i}.ffn_up.weight": normal(f, h, 1.0 / np.sqrt(h)),
            f"blk.{i}.ffn_down.weight": down,
        }
    output = normal(n_vocab, h, _WORD_LOGIT_STD / np.sqrt(h))
    output[:, 0] = 0.0
    output[list(vocab.suppressed), :] = 0.0
    output[list(vocab.suppressed), 0] = _SUPPRESSED_LOGIT_WEIGHT
    tensors["output.weight"] = output
    return tensors


def write_model(spec: ModelSpec, path: Path) -> Path:
    """Write ``spec`` as a GGUF file at ``path`` (overwritten) and return ``path``."""
    import gguf

    vocab = build_vocabulary()
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(f"tunegate-random-{spec.name}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if spec.dtype == "f16"
                         else gguf.LlamaFileType.ALL_F32)
    writer.add_vocab_size(len(vocab.tokens))
    writer.add_context_length(spec.context)
    writer.add_embedding_length(spec.hidden)
    writer.add_block_count(spec.layers)
    writer.add_feed_forward_length(spec.ffn)
    writer.add_head_count(spec.heads)
    writer.add_head_count_kv(spec.kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(list(vocab.tokens))
    writer.add_token_scores(list(vocab.scores))
    writer.add_token_types(list(vocab.types))
    writer.add_unk_token_id(_UNK)
    writer.add_bos_token_id(_BOS)
    writer.add_eos_token_id(_EOS)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, tensor in _weights(spec, vocab).items():
        data = tensor.astype(np.float16) if spec.dtype == "f16" and tensor.ndim == 2 else tensor
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def ensure_model(spec: ModelSpec | str, cache_dir: Path | None = None) -> Path:
    """The cached GGUF file of ``spec`` (a spec or a name in :data:`MODELS`), written if absent.

    Args:
        spec: The model, or ``"tiny"``/``"bench"``.
        cache_dir: Directory for model files (default ``<cache root>/models``).

    Raises:
        KeyError: ``spec`` names no model in :data:`MODELS`.
    """
    if isinstance(spec, str):
        spec = MODELS[spec]
    directory = cache_dir if cache_dir is not None else cache_root() / "models"
    path = directory / spec.file_name()
    if path.is_file():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{spec.name}-", suffix=".gguf.tmp")
    os.close(fd)
    try:
        write_model(spec, Path(tmp))
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path
