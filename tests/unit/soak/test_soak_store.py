"""The soak directory: ``soak.json`` and one compressed records file per window, private, and
refused in one line when it is not what a soak wrote."""

from __future__ import annotations

import dataclasses
import gzip
import json
import stat
from pathlib import Path

import pytest

from tunegate.errors import ConfigError
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.soak import SoakStore
from tunegate.soak.store import DOCUMENT, FORMAT
from tunegate.testing import make_record

MS = 1_000_000


def _records() -> list[RequestRecord]:
    """A streamed answer, a non-streamed one, an HTTP error and a refused connection."""
    return [
        make_record(index=0, send_ns=0, times_ns=[20 * MS, 70 * MS, 120 * MS]),
        make_record(index=1, send_ns=130 * MS, times_ns=[400 * MS], output_tokens=8,
                    streamed=False, response_streamed=False),
        dataclasses.replace(make_record(index=2, send_ns=410 * MS, end_ns=415 * MS,
                                        output_tokens=0, outcome=Outcome.SERVER_ERROR,
                                        error="HTTP 500: overloaded"), http_status=500),
        make_record(index=3, send_ns=420 * MS, end_ns=421 * MS, output_tokens=0,
                    outcome=Outcome.SERVER_ERROR, error="cannot connect: refused"),
    ]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _one_line_refusal(store: SoakStore, action: str) -> str:
    with pytest.raises(ConfigError) as caught:
        getattr(store, action)()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_create_makes_a_private_directory_with_a_records_folder(tmp_path: Path) -> None:
    store = SoakStore(tmp_path / "nested" / "soak")
    store.create()
    assert (store.directory / "records").is_dir()
    assert _mode(store.directory / "records") == 0o700
    assert store.document_path == store.directory / DOCUMENT == store.directory / "soak.json"


def test_create_refuses_a_directory_that_holds_a_soak_and_names_resume(tmp_path: Path) -> None:
    store = SoakStore(tmp_path / "s1")
    store.create()
    store.write_document({"format": FORMAT, "windows": []})
    message = _one_line_refusal(store, "create")
    assert f"--resume {store.directory}" in message
    assert "--out" in message
    assert json.loads(store.document_path.read_text())["windows"] == []  # left as it was


def test_create_may_reuse_a_directory_without_a_soak(tmp_path: Path) -> None:
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / "notes.txt").write_text("mine")
    SoakStore(tmp_path / "s1").create()
    assert (tmp_path / "s1" / "notes.txt").read_text() == "mine"


def test_create_where_a_file_is_in_the_way_names_out(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file")
    store = SoakStore(tmp_path / "taken" / "soak")
    message = _one_line_refusal(store, "create")
    assert message.startswith(f"--out {store.directory}: cannot create it")


def test_the_document_round_trips_with_its_format_and_is_private(tmp_path: Path) -> None:
    store = SoakStore(tmp_path)
    store.create()
    document = {"format": FORMAT, "status": "running", "windows": [{"window": 0, "values": {}}]}
    store.write_document(document)
    assert _mode(store.document_path) == 0o600
    assert store.load() == document
    assert FORMAT == "tunegate-soak/1"
    store.write_document({"format": FORMAT, "status": "complete", "windows": []})  # whole
    assert store.load()["status"] == "complete"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_load_of_a_directory_without_a_soak_names_resume(tmp_path: Path) -> None:
    missing = SoakStore(tmp_path / "nowhere")
    message = _one_line_refusal(missing, "load")
    assert message.startswith(f"--resume {missing.directory}: no soak.json there")


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe\x00garbage", b""],
                         ids=["broken-json", "not-utf8", "empty"])
def test_load_of_an_unreadable_document_says_so_in_one_line(tmp_path: Path,
                                                            content: bytes) -> None:
    store = SoakStore(tmp_path)
    store.document_path.write_bytes(content)
    message = _one_line_refusal(store, "load")
    assert message.startswith(f"{store.document_path}: not readable as a soak document")


@pytest.mark.parametrize("document", [
    [1, 2, 3],
    {"windows": []},
    {"format": "tunegate-soak/0", "windows": []},
    {"format": "tunegate-summary/1", "windows": []},
], ids=["a-list", "no-format", "old-format", "another-tool-file"])
def test_load_of_another_kind_of_file_names_the_format(tmp_path: Path, document: object) -> None:
    store = SoakStore(tmp_path)
    store.document_path.write_text(json.dumps(document))
    message = _one_line_refusal(store, "load")
    assert message == f"{store.document_path}: not a soak document (format {FORMAT!r} expected)"


@pytest.mark.parametrize("windows", [None, {"0": {}}, "rows"])
def test_load_requires_the_windows_list(tmp_path: Path, windows: object) -> None:
    store = SoakStore(tmp_path)
    store.document_path.write_text(json.dumps({"format": FORMAT, "windows": windows}))
    assert _one_line_refusal(store, "load") == \
        f"{store.document_path}: field 'windows' must be a list"


def test_records_round_trip_through_one_gzip_file_per_window(tmp_path: Path) -> None:
    store = SoakStore(tmp_path)
    store.create()
    records = _records()
    store.write_records(42, records)
    path = store.records_path(42)
    assert path == tmp_path / "records" / "window-000042.jsonl.gz"
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"  # gzip
    lines = gzip.decompress(raw).decode().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2, 3]
    assert store.read_records(42) == records
    assert _mode(path) == 0o600


def test_a_records_file_is_replaced_whole_and_an_empty_window_reads_back_empty(
        tmp_path: Path) -> None:
    """A resumed soak rewrites the records of the window that was in progress."""
    store = SoakStore(tmp_path)
    store.create()
    store.write_records(3, _records())
    store.write_records(3, _records()[:1])
    assert store.read_records(3) == _records()[:1]
    store.write_records(4, [])
    assert store.read_records(4) == []
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == [
        "window-000003.jsonl.gz", "window-000004.jsonl.gz"]
