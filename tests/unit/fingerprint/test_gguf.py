"""The GGUF digest covers the header and metadata, never the tensors; a damaged file is an
error that says where (and an unknown field, never a crash)."""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from tunegate.fingerprint.gguf import GGUFError, gguf_digest
from tunegate.fingerprint.model_digest import model_digest

U8, I32, U32, F32, BOOL, STRING, ARRAY, U64 = 0, 5, 4, 6, 7, 8, 9, 10


class Writer:
    """A GGUF file written byte by byte (the format of ggml's docs/gguf.md)."""

    def __init__(self, version: int = 3, order: str = "<") -> None:
        self.version, self.order = version, order
        self.kvs: list[bytes] = []

    def count(self, n: int) -> bytes:
        return struct.pack(self.order + ("Q" if self.version >= 2 else "I"), n)

    def string(self, text: str) -> bytes:
        raw = text.encode()
        return self.count(len(raw)) + raw

    def value(self, kind: int, value: Any) -> bytes:
        formats = {U8: "B", I32: "i", U32: "I", F32: "f", BOOL: "?", U64: "Q"}
        if kind in formats:
            return struct.pack(self.order + formats[kind], value)
        if kind == STRING:
            return self.string(value)
        element, items = value
        out = struct.pack(self.order + "I", element) + self.count(len(items))
        return out + b"".join(self.value(element, item) for item in items)

    def kv(self, key: str, kind: int, value: Any) -> Writer:
        self.kvs.append(self.string(key) + struct.pack(self.order + "I", kind)
                        + self.value(kind, value))
        return self

    def metadata(self) -> bytes:
        return (b"GGUF" + struct.pack(self.order + "I", self.version) + self.count(1)
                + self.count(len(self.kvs)) + b"".join(self.kvs))

    def file(self, path: Path, tensor_data: bytes = b"\x00" * 64) -> Path:
        # one tensor info (name, dims, shape, type, offset), alignment padding, then data
        info = (self.string("token_embd.weight") + struct.pack(self.order + "I", 1)
                + struct.pack(self.order + "Q", 16) + struct.pack(self.order + "I", 0)
                + struct.pack(self.order + "Q", 0))
        head = self.metadata() + info
        path.write_bytes(head + b"\x00" * (-len(head) % 32) + tensor_data)
        return path


def llama(**changes: Any) -> Writer:
    """A plausible model's metadata; ``changes`` replace values by key."""
    entries: list[tuple[str, int, Any]] = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "tiny"),
        ("llama.context_length", U32, 2048),
        ("llama.rope.freq_base", F32, 10000.0),
        ("general.file_type", U32, 0),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<unk>", "<s>", "</s>", "\u2581the"])),
        ("tokenizer.ggml.scores", ARRAY, (F32, [0.0, 0.0, 0.0, -1.5])),
        ("tokenizer.ggml.token_type", ARRAY, (I32, [2, 3, 3, 1])),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("test.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["a"])])),
    ]
    writer = Writer()
    for key, kind, value in entries:
        writer.kv(key, kind, changes.get(key, value))
    return writer


def test_the_digest_is_sha256_of_exactly_the_header_and_metadata(tmp_path: Path) -> None:
    writer = llama()
    found = gguf_digest(writer.file(tmp_path / "m.gguf"))
    metadata = writer.metadata()
    assert found.digest == "sha256:" + hashlib.sha256(metadata).hexdigest()
    assert (found.version, found.tensor_count, found.kv_count) == (3, 1, 10)
    assert found.metadata_bytes == len(metadata)


def test_a_changed_metadata_value_changes_the_digest(tmp_path: Path) -> None:
    base = gguf_digest(llama().file(tmp_path / "a.gguf")).digest
    longer = gguf_digest(llama(**{"llama.context_length": 4096}).file(tmp_path / "b.gguf"))
    other_vocab = llama(**{"tokenizer.ggml.tokens": (STRING, ["<unk>", "<s>", "</s>", "\u2581a"])})
    assert longer.digest != base
    assert gguf_digest(other_vocab.file(tmp_path / "c.gguf")).digest != base


def test_changed_tensor_data_keeps_the_digest(tmp_path: Path) -> None:
    a = gguf_digest(llama().file(tmp_path / "a.gguf", tensor_data=b"\x00" * 64))
    b = gguf_digest(llama().file(tmp_path / "b.gguf", tensor_data=b"\xff" * 64))
    assert a.digest == b.digest
    assert (tmp_path / "a.gguf").read_bytes() != (tmp_path / "b.gguf").read_bytes()


@pytest.mark.parametrize("cut", [3, 10, 30, 200])
def test_a_truncated_file_says_where_it_ends(tmp_path: Path, cut: int) -> None:
    whole = llama().metadata()
    path = tmp_path / "cut.gguf"
    path.write_bytes(whole[:cut])
    with pytest.raises(GGUFError, match=r"truncated at byte \d+ while reading .*the file has "
                                        f"{cut}\\)"):
        gguf_digest(path)


def test_a_truncated_file_is_an_unknown_digest_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "cut.gguf"
    path.write_bytes(llama().metadata()[:100])
    field = model_digest(path, whose="GET /props model_path")
    assert (field.value, field.source) == (None, "unknown")
    assert "truncated at byte" in field.how and "(GET /props model_path)" in field.how


def test_what_is_not_gguf_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 60)
    with pytest.raises(GGUFError, match="not a GGUF file"):
        gguf_digest(path)


def test_an_unknown_value_type_is_refused_with_its_offset(tmp_path: Path) -> None:
    writer = Writer()
    writer.kvs.append(writer.string("x") + struct.pack("<I", 99))
    path = tmp_path / "bad.gguf"
    path.write_bytes(writer.metadata())
    with pytest.raises(GGUFError, match="unknown value type 99 at byte"):
        gguf_digest(path)


def test_an_absurd_length_is_refused_without_reading_on(tmp_path: Path) -> None:
    writer = Writer()
    writer.kvs.append(writer.count(1 << 60) + b"x")  # a key "longer" than any file
    path = tmp_path / "huge.gguf"
    path.write_bytes(writer.metadata())
    with pytest.raises(GGUFError, match="truncated"):
        gguf_digest(path)


def test_version_1_and_big_endian_files_are_read(tmp_path: Path) -> None:
    for name, writer in (("v1", Writer(version=1)), ("be", Writer(order=">"))):
        writer.kv("general.architecture", STRING, "llama").kv("n", U64, 7)
        found = gguf_digest(writer.file(tmp_path / f"{name}.gguf"))
        assert found.kv_count == 2
        assert found.digest == "sha256:" + hashlib.sha256(writer.metadata()).hexdigest()


def test_an_unsupported_version_is_named(tmp_path: Path) -> None:
    path = tmp_path / "v9.gguf"
    path.write_bytes(Writer(version=9).metadata())
    with pytest.raises(GGUFError, match="GGUF version 9"):
        gguf_digest(path)


def test_a_fifo_is_not_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)  # opening it for reading would block forever
    field = model_digest(fifo)
    assert field.source == "unknown" and "neither a regular file nor a directory" in field.how


def test_the_written_files_read_as_gguf_with_the_reference_reader(tmp_path: Path) -> None:
    """The stand-in files are real GGUF: ggml's own Python reader parses them, and its last
    key-value ends where the digest stops."""
    gguf = pytest.importorskip("gguf")
    path = llama().file(tmp_path / "m.gguf")
    reader = gguf.GGUFReader(path)
    assert str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8") == "llama"
    end = max(f.offset + sum(p.nbytes for p in f.parts) for f in reader.fields.values())
    assert gguf_digest(path).metadata_bytes == end
    assert [t.name for t in reader.tensors] == ["token_embd.weight"]
