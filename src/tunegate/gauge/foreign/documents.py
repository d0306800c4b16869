"""A report file's text as the documents it holds: one JSON value, several, or YAML.

Benchmark tools write their results in more shapes than "one JSON object":

* one JSON object (vLLM ``--save-result``, AIPerf, GuideLLM ``.json``, tunegate);
* one JSON object per line (vLLM ``--append-result``, SGLang ``bench_serving --output-file``,
  which appends a line per run of a sweep; AIPerf's per-request ``profile_export.jsonl``);
* JSON objects written one after another without a separator (several ``--save-result`` runs
  concatenated into one file);
* a JSON array of results (``vllm bench sweep``'s ``summary.json``);
* YAML (GuideLLM 0.2 writes ``benchmarks.yaml`` as readily as ``.json``).

Python's JSON reader accepts the bare ``Infinity`` and ``NaN`` that SGLang and vLLM write for
an unbounded request rate. YAML is read with PyYAML's safe loader (no object construction from
tags), and only when the text does not start like JSON, so a truncated JSON file is reported as
broken JSON, not as an odd YAML document.

A sweep interrupted while appending leaves its last record cut off: the records before it are
whole and are read (``Documents.cut``), the cut one is named; a broken record anywhere else
refuses the file. Nesting deeper than the parser can follow and integers longer than Python reads
are refused as broken input, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["Documents", "DocumentsError", "read_documents"]

_DECODER = json.JSONDecoder()
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DocumentsError(ValueError):
    """The text is neither JSON, a sequence of JSON values, nor YAML; says where it broke."""


@dataclass(frozen=True, slots=True)
class Documents:
    """What a file holds.

    Attributes:
        values: The documents, in file order.
        where: Where each document is, for messages (``line 3``, ``element 2``).
        syntax: ``json`` (one value), ``json-seq`` (several: JSONL or concatenated),
            ``json-array`` (an array of objects), ``yaml``.
        cut: When the last record of a sequence is cut off: where, and why it does not parse.
    """

    values: tuple[Any, ...]
    where: tuple[str, ...]
    syntax: str
    cut: str | None = None


def _unreadable(exc: BaseException) -> str | None:
    """Why the parser gave up on input it could not hold (nesting, huge integers)."""
    if isinstance(exc, RecursionError):
        return "nested deeper than can be read"
    if isinstance(exc, ValueError) and "digits" in str(exc):
        return "holds an integer with more digits than can be read (over 4300)"
    return None


def _json_sequence(text: str) -> Documents:
    """Every JSON value in ``text``, separated by whitespace (newlines or none).

    Line numbers are carried forward, so reading stays linear in the file's size.
    """
    values: list[Any] = []
    where: list[str] = []
    position, end, line, counted = 0, len(text), 1, 0
    while True:
        while position < end and text[position].isspace():
            position += 1
        if position >= end:
            break
        line += text.count("\n", counted, position)
        counted = position
        try:
            value, position_after = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            broken = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
            if not values:
                raise DocumentsError(f"not valid JSON ({broken})") from None
            record = f"record {len(values) + 1} starting on line {line}"
            if "\n" not in text[position:].strip():  # the last record: an interrupted append
                return Documents(tuple(values), tuple(where), "json-seq",
                                 cut=f"{record} is cut off ({broken})")
            raise DocumentsError(f"not valid JSON ({record}: {broken})") from None
        values.append(value)
        where.append(f"line {line}")
        position = position_after
    return Documents(tuple(values), tuple(where), "json-seq" if len(values) > 1 else "json")


def _one(value: Any, syntax: str) -> Documents:
    """One parsed value; an array of objects is a document per element."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return Documents(tuple(value), tuple(f"element {i}" for i in range(1, len(value) + 1)),
                         "json-array")
    return Documents((value,), ("line 1",), syntax)


def _looks_like_json(text: str) -> bool:
    stripped = text.lstrip("\ufeff \t\r\n")
    return stripped[:1] in ("{", "[")


def read_documents(text: str) -> Documents:
    """Parse a report's text into documents.

    Raises:
        DocumentsError: Malformed JSON (with line and column) or malformed YAML (with the mark),
            or input nested or sized beyond what can be read.
    """
    try:
        return _read(text)
    except (RecursionError, ValueError) as exc:
        if isinstance(exc, DocumentsError) or (why := _unreadable(exc)) is None:
            raise
        raise DocumentsError(why) from None


def _read(text: str) -> Documents:
    try:
        return _one(json.loads(text), "json")
    except json.JSONDecodeError as first:
        if _looks_like_json(text):
            try:
                return _json_sequence(text)
            except DocumentsError as sequence_error:
                if "record " in str(sequence_error):
                    raise  # several records read: the later one is what broke
                raise DocumentsError(f"not valid JSON (line {first.lineno}, column "
                                     f"{first.colno}: {first.msg})") from None
    if not text.strip():
        raise DocumentsError("is empty")
    try:
        value = yaml.load(text, Loader=_YAML_LOADER)  # a safe loader (C or pure Python)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise DocumentsError(f"neither JSON nor YAML (YAML{where}: {problem})") from None
    return _one(value, "yaml")
