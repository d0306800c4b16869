"""Prompt files the user provides: JSONL prompt lists and ShareGPT conversations.

JSONL: one JSON object per non-blank line, ``{"prompt": str, "max_tokens": int}``; the output
length may also be spelled ``output_tokens`` (both given must agree) and is optional; other
fields are ignored. Any malformed line stops the load with ``file:line`` and the field.

ShareGPT: a JSON list of ``{"conversations": [{"from": "human", "value": str},
{"from": "gpt", "value": str}, ...]}``. The prompt is the first human/user turn with text, the
reply is the first assistant turn after it. Malformed entries are skipped and counted by
reason; a file without one usable entry is an error.

Sampling (:func:`sample_entries`) draws entries *without replacement* in a seeded order and
fails when the file has fewer entries than requested: repeating a prompt would let a server's
prefix cache serve it and flatter the measurement, so tunegate never cycles silently.

Hostile files end in one :class:`~tunegate.errors.InputFileError` naming the file (and line),
never in a traceback or a hang: a path that is not a regular file (a FIFO or ``/dev/zero``
would block or never end), a file over :data:`MAX_DATASET_BYTES` (it is read and parsed whole),
text that is not UTF-8, JSON nested deeper than Python's parser can follow, integers longer
than its 4300-digit limit, and output lengths above ``lengths.MAX_LENGTH``.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tunegate.errors import InputFileError
from tunegate.workload.lengths import MAX_LENGTH

__all__ = [
    "HUMAN_ROLES",
    "MAX_DATASET_BYTES",
    "REPLY_ROLES",
    "Dataset",
    "DatasetEntry",
    "load_jsonl",
    "load_sharegpt",
    "sample_entries",
]

MAX_DATASET_BYTES = 1 << 30
"""Largest prompt file read (1 GiB): it is read and parsed whole, and parsed JSON takes several
times the file's size in memory. The full ShareGPT V3 file is 673 MB."""

HUMAN_ROLES = frozenset({"human", "user"})
REPLY_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})
_JSONL_EXAMPLE = '{"prompt": "...", "max_tokens": 128}'
_SHAREGPT_EXAMPLE = (
    '[{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}]'
)


@dataclass(frozen=True, slots=True)
class DatasetEntry:
    """One usable prompt from a file.

    Attributes:
        prompt: The prompt text.
        output_tokens: Output length the file asks for (JSONL ``max_tokens``), else ``None``.
        reply: The reference reply (ShareGPT), whose token count can set the output length.
        origin: Where it came from: ``"file:line"`` (JSONL) or ``"file#index"`` (ShareGPT).
    """

    prompt: str
    output_tokens: int | None = None
    reply: str | None = None
    origin: str = ""


@dataclass(frozen=True, slots=True)
class Dataset:
    """The usable entries of one file, with what was skipped and the file's hash."""

    path: Path
    format: Literal["jsonl", "sharegpt"]
    entries: tuple[DatasetEntry, ...]
    sha256: str
    skipped: Mapping[str, int] = field(default_factory=dict)


def _read_bytes(path: Path, kind: str) -> bytes:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(
                f"{path}: not a regular file; give dataset_path a {kind} file (a directory, "
                "FIFO or device would block or never end)")
        if info.st_size > MAX_DATASET_BYTES:
            raise InputFileError(
                f"{path}: {info.st_size:,} bytes, above the limit of {MAX_DATASET_BYTES:,} "
                f"(1 GiB) for a {kind} file, which is read and parsed whole; use a sample of it")
        return path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such {kind} file; check dataset_path") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the {kind} file ({exc.strerror})") from None


def _loads(text: str, where: str, hint: str, *, whole_file: bool = False) -> Any:
    """``json.loads`` whose every failure names ``where`` and what to do; a ``whole_file``
    adds the line of a syntax error (a JSONL ``where`` is already ``file:line``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = f":{exc.lineno}" if whole_file else ""
        raise InputFileError(
            f"{where}{line}: invalid JSON ({exc.msg} at column {exc.colno}); {hint}"
        ) from None
    except RecursionError:
        raise InputFileError(f"{where}: JSON nested deeper than can be read; {hint}") from None
    except ValueError as exc:  # an integer over Python's 4300-digit conversion limit
        raise InputFileError(f"{where}: unreadable JSON ({exc}); {hint}") from None


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{path}: not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8"
        ) from None


def _output_length(obj: Mapping[str, Any], where: str) -> int | None:
    values: dict[str, int] = {}
    for name in ("max_tokens", "output_tokens"):
        if name not in obj or obj[name] is None:
            continue
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputFileError(f"{where}: field {name!r} must be an integer >= 1, got {value!r}")
        if value > MAX_LENGTH:
            raise InputFileError(
                f"{where}: field {name!r} is {value}, above the limit of {MAX_LENGTH:,} tokens "
                "per request (no served model writes more in one request)")
        values[name] = value
    if len(set(values.values())) > 1:
        raise InputFileError(
            f"{where}: fields 'max_tokens' ({values['max_tokens']}) and 'output_tokens' "
            f"({values['output_tokens']}) disagree; keep one of them"
        )
    return next(iter(values.values()), None)


def load_jsonl(path: Path) -> Dataset:
    """Read a JSONL prompt file.

    Args:
        path: The file; blank lines are allowed.

    Returns:
        Every line's entry, in file order.

    Raises:
        InputFileError: the file is missing or unreadable, or a line is not a JSON object with a
            non-empty string ``prompt`` and an optional integer ``max_tokens``/``output_tokens``
            >= 1; the message names ``file:line`` and the field.
    """
    data = _read_bytes(path, "JSONL prompt")
    entries: list[DatasetEntry] = []
    for lineno, line in enumerate(_decode(path, data).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        obj = _loads(line, where, f"each non-blank line must be one object like {_JSONL_EXAMPLE}")
        if not isinstance(obj, dict):
            raise InputFileError(
                f"{where}: expected a JSON object like {_JSONL_EXAMPLE}, got {type(obj).__name__}"
            )
        prompt = obj.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            shown = "missing" if "prompt" not in obj else repr(prompt)
            raise InputFileError(f"{where}: field 'prompt' must be a non-empty string, got {shown}")
        entries.append(DatasetEntry(prompt, _output_length(obj, where), None, where))
    if not entries:
        raise InputFileError(f"{path}: no prompts; expected lines like {_JSONL_EXAMPLE}")
    return Dataset(path, "jsonl", tuple(entries), hashlib.sha256(data).hexdigest())


def _sharegpt_entry(item: Any) -> tuple[str, str] | str:
    """The (prompt, reply) of one ShareGPT item, or the reason it is unusable."""
    if not isinstance(item, dict):
        return "not an object"
    turns = item.get("conversations")
    if not isinstance(turns, list):
        return "no 'conversations' list"
    prompt: str | None = None
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        role, value = turn.get("from", turn.get("role")), turn.get("value", turn.get("content"))
        if not isinstance(value, str) or not value.strip():
            continue
        if prompt is None and role in HUMAN_ROLES:
            prompt = value
        elif prompt is not None and role in REPLY_ROLES:
            return prompt, value
    return "no human turn with text" if prompt is None else "no reply after the human turn"


def load_sharegpt(path: Path) -> Dataset:
    """Read a ShareGPT-format JSON file.

    Args:
        path: A JSON list of conversation objects.

    Returns:
        The usable entries in file order; ``skipped`` counts the rest by reason.

    Raises:
        InputFileError: the file is missing, unreadable, not JSON, not a list, or has no usable
            entry.
    """
    data = _read_bytes(path, "ShareGPT")
    items = _loads(_decode(path, data), str(path),
                   f"expected a ShareGPT list like {_SHAREGPT_EXAMPLE}", whole_file=True)
    if not isinstance(items, list):
        raise InputFileError(
            f"{path}: expected a JSON list of conversations like {_SHAREGPT_EXAMPLE}, "
            f"got {type(items).__name__}"
        )
    entries: list[DatasetEntry] = []
    skipped: Counter[str] = Counter()
    for index, item in enumerate(items):
        result = _sharegpt_entry(item)
        if isinstance(result, str):
            skipped[result] += 1
        else:
            entries.append(DatasetEntry(result[0], None, result[1], f"{path}#{index}"))
    if not entries:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
        raise InputFileError(
            f"{path}: no usable ShareGPT entries among {len(items)} ({reasons or 'empty list'}); "
            f"each needs a human turn followed by a reply, like {_SHAREGPT_EXAMPLE}"
        )
    digest = hashlib.sha256(data).hexdigest()
    return Dataset(path, "sharegpt", tuple(entries), digest, dict(skipped))


def sample_entries(dataset: Dataset, n: int, rng: np.random.Generator) -> list[DatasetEntry]:
    """Draw ``n`` distinct entries in a seeded order.

    The order is one permutation of the whole file, so the first ``k`` entries drawn do not
    depend on ``n``: asking for more requests only appends.

    Args:
        dataset: The loaded file.
        n: Entries wanted.
        rng: Generator for the permutation.

    Raises:
        InputFileError: the file has fewer usable entries than ``n``.
    """
    available = len(dataset.entries)
    if n > available:
        raise InputFileError(
            f"{dataset.path}: {available} usable prompts, but {n} requests (warm-up included) "
            "need as many distinct prompts; lower num_requests/num_warmup or add prompts "
            "(tunegate does not repeat prompts: a server's prefix cache would flatter them)"
        )
    order = rng.permutation(available)[:n]
    return [dataset.entries[int(i)] for i in order]
