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
    """

    values: tuple[Any, ...]
    where: tuple[str, ...]
    syntax: str


def _json_sequence(text: str) -> Documents:
    """Every JSON value in ``text``, separated by whitespace (newlines or none)."""
    values: list[Any] = []
    where: list[str] = []
    position, end = 0, len(text)
    while True:
        while position < end and text[position].isspace():
            position += 1
        if position >= end:
            break
        try:
            value, position_after = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            broken = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
            if values:
                start = text.count("\n", 0, position) + 1
                broken = f"record {len(values) + 1} starting on line {start}: {broken}"
            raise DocumentsError(f"not valid JSON ({broken})") from None
        values.append(value)
        line = text.count("\n", 0, position) + 1
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
        DocumentsError: Malformed JSON (with line and column) or malformed YAML (with the mark).
    """
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
