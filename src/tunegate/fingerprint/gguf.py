"""A GGUF model's identity: sha256 over its header and metadata key-values, never its tensors.

GGUF (ggml's model file, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) begins::

    magic "GGUF" | version u32 | tensor_count u64 | kv_count u64 | kv_count key-values ...
    then tensor infos, padding, tensor data

(version 1 wrote the two counts and every string length as u32). A key-value is a string key,
a u32 value type and the value: a scalar (u8/i8/u16/i16/u32/i32/f32/bool/u64/i64/f64), a string
(u64 length + UTF-8 bytes), or an array (u32 element type, u64 count, elements; arrays nest).
The byte order is the file's: little-endian, or big-endian when the version only reads as a
small number that way.

The digest covers the bytes from the magic to the end of the last key-value: architecture,
hyper-parameters, tokenizer, chat template, quantisation type. Two files that differ only in
tensor data (a re-quantisation with the same settings, a corrupted weight) share it; any
change of a metadata value changes it. The file is walked once to find where the metadata
ends (fixed-size arrays are skipped, not read), then that prefix is hashed. A file that is not
GGUF, is truncated inside its metadata, or declares absurd sizes raises :class:`GGUFError`
with the offset and what was being read; nothing past the metadata is ever read.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["MAX_METADATA_BYTES", "GGUFDigest", "GGUFError", "gguf_digest"]

MAX_METADATA_BYTES = 256 << 20
"""Largest metadata section read (a 256k-token vocabulary with merges is about 20 MiB)."""

_MAGIC = b"GGUF"
_STRING, _ARRAY = 8, 9
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_MAX_DEPTH = 8


class GGUFError(ValueError):
    """The file is not GGUF tunegate can read: says where and what."""


@dataclass(frozen=True, slots=True)
class GGUFDigest:
    """A GGUF file's metadata digest.

    Attributes:
        digest: ``sha256:<hex>`` of the header and metadata bytes.
        version: The GGUF version.
        tensor_count: Tensors the header declares.
        kv_count: Metadata key-values.
        metadata_bytes: Bytes hashed.
    """

    digest: str
    version: int
    tensor_count: int
    kv_count: int
    metadata_bytes: int


class _Walker:
    """Reads the metadata of one open file, tracking the offset."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self.handle, self.size, self.order, self.wide = handle, size, "<", True

    @property
    def offset(self) -> int:
        return self.handle.tell()

    def take(self, n: int, what: str) -> bytes:
        at = self.offset
        if at + n > self.size:
            raise GGUFError(f"truncated at byte {at} while reading {what} ({n} bytes, the file "
                            f"has {self.size})")
        if at + n > MAX_METADATA_BYTES:
            raise GGUFError(f"metadata runs past {MAX_METADATA_BYTES >> 20} MiB at byte {at} "
                            f"({what}): not a GGUF header tunegate reads")
        return self.handle.read(n)

    def skip(self, n: int, what: str) -> None:
        at = self.offset
        if at + n > self.size or at + n > MAX_METADATA_BYTES:
            self.take(n, what)  # raises with the reason
        self.handle.seek(at + n)

    def u32(self, what: str) -> int:
        value: int = struct.unpack(self.order + "I", self.take(4, what))[0]
        return value

    def count(self, what: str) -> int:
        if not self.wide:
            return self.u32(what)
        value: int = struct.unpack(self.order + "Q", self.take(8, what))[0]
        return value

    def string(self, what: str) -> bytes:
        return self.take(self.count(f"{what} length"), what)

    def value(self, kind: int, what: str, depth: int = 0) -> None:
        if kind in _SCALAR_SIZES:
            self.skip(_SCALAR_SIZES[kind], what)
        elif kind == _STRING:
            self.skip(self.count(f"{what} length"), what)
        elif kind == _ARRAY:
            if depth >= _MAX_DEPTH:
                raise GGUFError(f"arrays nested deeper than {_MAX_DEPTH} at byte {self.offset}")
            element = self.u32(f"{what} element type")
            n = self.count(f"{what} length")
            if element in _SCALAR_SIZES:
                self.skip(n * _SCALAR_SIZES[element], f"{what} ({n} elements)")
            elif element == _STRING:  # a vocabulary: no per-element message until one fails
                item, length = f"a string of {what}", f"a string length of {what}"
                for _ in range(n):
                    self.skip(self.count(length), item)
            elif element == _ARRAY:
                for i in range(n):
                    self.value(element, f"{what}[{i}]", depth + 1)
            else:
                raise GGUFError(f"{what}: unknown array element type {element} at byte "
                                f"{self.offset - 12}")
        else:
            raise GGUFError(f"{what}: unknown value type {kind} at byte {self.offset - 4}")


def _header(walker: _Walker) -> tuple[int, int, int]:
    magic = walker.take(4, "the magic")
    if magic != _MAGIC:
        raise GGUFError(f"not a GGUF file (it begins with {magic!r}, not {_MAGIC!r})")
    raw = walker.take(4, "the version")
    version = struct.unpack("<I", raw)[0]
    if version & 0xFFFF == 0 and 0 < struct.unpack(">I", raw)[0] <= 0xFFFF:
        walker.order, version = ">", struct.unpack(">I", raw)[0]  # a big-endian file
    if not 1 <= version <= 3:
        raise GGUFError(f"GGUF version {version} is not one tunegate reads (1-3)")
    walker.wide = version >= 2
    return version, walker.count("the tensor count"), walker.count("the key-value count")


def gguf_digest(path: Path | str) -> GGUFDigest:
    """Digest the header and metadata of the GGUF file at ``path`` (module docstring).

    Raises:
        GGUFError: Not a regular file, not GGUF, truncated or garbled metadata; the message
            says where.
        OSError: The file cannot be opened or read.
    """
    path = Path(path)
    if not path.is_file():
        raise GGUFError(f"{path} is not a regular file")
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        walker = _Walker(handle, size)
        version, tensors, kvs = _header(walker)
        for i in range(kvs):
            key = walker.string(f"key {i}")
            try:
                name = key.decode("utf-8")
            except UnicodeDecodeError:
                raise GGUFError(f"key {i} at byte {walker.offset - len(key)} is not UTF-8 "
                                "text") from None
            walker.value(walker.u32(f"the type of {name!r}"), f"the value of {name!r}")
        end = walker.offset
        hasher = hashlib.sha256()
        handle.seek(0)
        left = end
        while left:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                raise GGUFError(f"{path} shrank while it was read")
            hasher.update(chunk)
            left -= len(chunk)
    return GGUFDigest(f"sha256:{hasher.hexdigest()}", version, tensors, kvs, end)
