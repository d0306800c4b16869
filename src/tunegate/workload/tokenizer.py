"""Offline tokenizers: a tiny protocol plus loaders for HuggingFace JSON and cached tiktoken.

``load_tokenizer`` never touches the network. Accepted specs:

- a path to a HuggingFace ``tokenizer.json`` file, or to a directory that contains one (a local
  model snapshot), loaded with the ``tokenizers`` package;
- ``tiktoken:ENCODING`` (e.g. ``tiktoken:cl100k_base``), only when the encoding's BPE file is
  already in tiktoken's cache (``TIKTOKEN_CACHE_DIR``); tiktoken would otherwise download it.

Both packages are optional (``pip install 'tunegate[tokenizers]'``) and imported lazily.
Token counts cover the prompt text only (no special tokens); a chat template adds a few more,
which the server's usage report includes.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from tunegate.errors import TokenizerError

__all__ = ["HuggingFaceTokenizer", "TiktokenTokenizer", "Tokenizer", "load_tokenizer"]

_INSTALL_HINT = "pip install 'tunegate[tokenizers]'"
_TIKTOKEN_PREFIX = "tiktoken:"
_tiktoken_lock = threading.Lock()


@runtime_checkable
class Tokenizer(Protocol):
    """What tunegate needs from a tokenizer."""

    @property
    def name(self) -> str:
        """Where the tokenizer came from (path or ``tiktoken:ENCODING``), for descriptions."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (``len(encode(text))``)."""
        ...


class HuggingFaceTokenizer:
    """A ``tokenizers.Tokenizer`` loaded from a local ``tokenizer.json``."""

    def __init__(self, backend: Any, name: str) -> None:
        """Wrap an already loaded ``tokenizers.Tokenizer``.

        Args:
            backend: The ``tokenizers.Tokenizer`` instance.
            name: The path it was loaded from.
        """
        self._backend = backend
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Pickles as its file name, loaded again where it is unpickled (a worker process that
        # builds prompts on demand), not as the whole vocabulary.
        return (load_tokenizer, (self._name,))

    def encode(self, text: str) -> list[int]:
        return list(self._backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self._backend.decode(ids, skip_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self.encode(text))


class TiktokenTokenizer:
    """A ``tiktoken.Encoding``; special-token text is encoded as ordinary text."""

    def __init__(self, encoding: Any, name: str) -> None:
        """Wrap an already loaded ``tiktoken.Encoding``.

        Args:
            encoding: The ``tiktoken.Encoding`` instance.
            name: ``tiktoken:ENCODING``.
        """
        self._encoding = encoding
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Pickles as its encoding name, loaded again (offline) where it is unpickled.
        return (load_tokenizer, (self._name,))

    def encode(self, text: str) -> list[int]:
        return list(self._encoding.encode(text, disallowed_special=()))

    def decode(self, ids: list[int]) -> str:
        return str(self._encoding.decode(ids))

    def count(self, text: str) -> int:
        return len(self.encode(text))


def _import_optional(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise TokenizerError(
            f"tokenizer support needs the optional package {module!r}, which is not installed; "
            f"run: {_INSTALL_HINT}"
        ) from None


class _OfflineBlock(Exception):
    """Raised inside tiktoken instead of downloading."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


def _load_tiktoken(spec: str) -> TiktokenTokenizer:
    encoding_name = spec[len(_TIKTOKEN_PREFIX) :].strip()
    tiktoken = _import_optional("tiktoken")
    tiktoken_load = importlib.import_module("tiktoken.load")
    known = sorted(tiktoken.list_encoding_names())
    if encoding_name not in known:
        raise TokenizerError(
            f"tokenizer {spec!r}: unknown tiktoken encoding {encoding_name!r}; "
            f"known encodings: {', '.join(known)}"
        )
    original = getattr(tiktoken_load, "read_file")  # noqa: B009

    def read_local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise _OfflineBlock(blobpath)
        data: bytes = original(blobpath)
        return data

    # tiktoken reads its cache first and calls load.read_file only on a cache miss, which
    # would download; swap that one function for the duration of the load.
    with _tiktoken_lock:
        setattr(tiktoken_load, "read_file", read_local_only)  # noqa: B010
        try:
            encoding = tiktoken.get_encoding(encoding_name)
        except _OfflineBlock as exc:
            raise TokenizerError(
                f"tokenizer {spec!r}: the encoding is not in tiktoken's offline cache and "
                f"tunegate never downloads (it would fetch {exc.url}). On a machine with "
                "internet access, load it once with TIKTOKEN_CACHE_DIR set, copy that directory "
                "here and set TIKTOKEN_CACHE_DIR to it; or pass a local tokenizer.json instead."
            ) from None
        finally:
            setattr(tiktoken_load, "read_file", original)  # noqa: B010
    return TiktokenTokenizer(encoding, f"{_TIKTOKEN_PREFIX}{encoding_name}")


def _load_huggingface(spec: str) -> HuggingFaceTokenizer:
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise TokenizerError(
            f"tokenizer {spec!r}: no such file {str(path)!r}. Pass a local HuggingFace "
            "tokenizer.json (or the model directory that contains it), or "
            "'tiktoken:ENCODING' with the encoding in TIKTOKEN_CACHE_DIR; hub model names "
            "are not downloaded."
        )
    tokenizers = _import_optional("tokenizers")
    try:
        backend = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:
        raise TokenizerError(
            f"tokenizer {spec!r}: {str(path)!r} is not a valid HuggingFace tokenizer.json "
            f"({exc}); pass the tokenizer.json of the served model."
        ) from None
    return HuggingFaceTokenizer(backend, str(path))


def load_tokenizer(spec: str) -> Tokenizer:
    """Load a tokenizer without network access.

    Args:
        spec: A path to ``tokenizer.json`` or a directory holding one, or ``tiktoken:ENCODING``.

    Returns:
        The loaded tokenizer; its ``name`` records where it came from.

    Raises:
        TokenizerError: the optional package is missing, the file is missing or invalid, or the
            tiktoken encoding is not cached offline. The message says what to do.
    """
    if spec.startswith(_TIKTOKEN_PREFIX):
        return _load_tiktoken(spec)
    return _load_huggingface(spec)
