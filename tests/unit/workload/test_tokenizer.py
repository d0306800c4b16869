"""Loading tokenizers offline: local tokenizer.json, cached tiktoken, clear failures."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from tunegate.errors import TokenizerError
from tunegate.workload.tokenizer import Tokenizer, load_tokenizer


def test_loads_a_tokenizer_json_file(word_tokenizer_path: Path) -> None:
    tok = load_tokenizer(str(word_tokenizer_path))
    assert isinstance(tok, Tokenizer)
    assert tok.name == str(word_tokenizer_path)
    ids = tok.encode("the mother of the sea")
    assert len(ids) == 5 == tok.count("the mother of the sea")
    assert tok.decode(ids) == "the mother of the sea"


def test_loads_a_directory_holding_tokenizer_json(word_tokenizer_path: Path) -> None:
    tok = load_tokenizer(str(word_tokenizer_path.parent))
    assert tok.name == str(word_tokenizer_path)


def test_missing_path_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="no such file") as info:
        load_tokenizer(str(tmp_path / "nope"))
    assert "tokenizer.json" in str(info.value) and "tiktoken:ENCODING" in str(info.value)


def test_invalid_tokenizer_json(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(TokenizerError, match=r"not a valid HuggingFace tokenizer\.json"):
        load_tokenizer(str(bad))


def test_missing_tokenizers_package_names_the_extra(
    word_tokenizer_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import now raises ImportError
    with pytest.raises(TokenizerError, match=r"pip install 'tunegate\[tokenizers\]'"):
        load_tokenizer(str(word_tokenizer_path))


def test_missing_tiktoken_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(TokenizerError, match=r"pip install 'tunegate\[tokenizers\]'"):
        load_tokenizer("tiktoken:cl100k_base")


def _fake_tiktoken(monkeypatch: pytest.MonkeyPatch, cached: bool) -> None:
    """Install a stand-in ``tiktoken`` whose loader reads through ``tiktoken.load.read_file``
    on a cache miss, exactly where the real one would download."""
    load = types.ModuleType("tiktoken.load")

    def read_file(blobpath: str) -> bytes:
        raise AssertionError(f"network access attempted: {blobpath}")

    def read_file_cached(blobpath: str) -> bytes:
        return b"cached" if cached else load.read_file(blobpath)

    load.read_file = read_file  # type: ignore[attr-defined]
    tiktoken = types.ModuleType("tiktoken")

    class Encoding:
        def encode(self, text: str, disallowed_special: object = ()) -> list[int]:
            return [len(word) for word in text.split()]

        def decode(self, ids: list[int]) -> str:
            return " ".join("x" * i for i in ids)

    def get_encoding(name: str) -> Encoding:
        read_file_cached(f"https://example.invalid/{name}.tiktoken")
        return Encoding()

    tiktoken.get_encoding = get_encoding  # type: ignore[attr-defined]
    tiktoken.list_encoding_names = lambda: ["cl100k_base", "o200k_base"]  # type: ignore[attr-defined]
    tiktoken.load = load  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", tiktoken)
    monkeypatch.setitem(sys.modules, "tiktoken.load", load)


def test_uncached_tiktoken_encoding_fails_without_downloading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_tiktoken(monkeypatch, cached=False)
    with pytest.raises(TokenizerError) as info:
        load_tokenizer("tiktoken:cl100k_base")
    message = str(info.value)
    assert "not in tiktoken's offline cache" in message
    assert "TIKTOKEN_CACHE_DIR" in message and "tokenizer.json" in message
    # the loader is restored afterwards
    with pytest.raises(AssertionError, match="network access attempted"):
        sys.modules["tiktoken.load"].read_file("https://x")


def test_cached_tiktoken_encoding_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_tiktoken(monkeypatch, cached=True)
    tok = load_tokenizer("tiktoken:cl100k_base")
    assert tok.name == "tiktoken:cl100k_base"
    assert tok.count("one two three") == 3


def test_unknown_tiktoken_encoding_lists_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_tiktoken(monkeypatch, cached=True)
    with pytest.raises(TokenizerError, match="known encodings: cl100k_base, o200k_base"):
        load_tokenizer("tiktoken:gpt5_base")
