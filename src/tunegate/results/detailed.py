"""The per-request part of a ``--save-detailed`` result, written while the run goes on.

A detailed result holds vLLM's per-request arrays (``input_lens``, ``output_lens``, ``ttfts``,
``itls``, ``generated_texts``, ``errors``; ``ttfats``, ``reasoning_lens`` and ``answer_lens``
when a request reasoned) and tunegate's full ``records``. Built as one in-memory document they
cost about 58 KiB per request at their peak (the records, the arrays, a copy, the encoder's
strings). :class:`DetailedParts` instead writes each array's JSON text, element by element, to
its own anonymous temporary file as each request ends (:meth:`DetailedParts.add`), and
:meth:`DetailedParts.chunks` joins them behind the rest of the document when the result is
written, so memory does not grow with the run.

Order: the elements are in the order requests ended, the same order in every array, so
``ttfts[i]`` and ``itls[i]`` still describe one request (``records[j]["index"]`` names it).
Results kept in memory (``--report``) keep index order, as before.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from typing import IO, Any, Final

from tunegate.loadgen.records import RequestRecord
from tunegate.metrics.definitions import NS_PER_S, itl_ns, ttfat_ns, ttft_ns

__all__ = ["ARRAYS", "REASONING_ARRAYS", "DetailedParts"]

ARRAYS: Final = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors",
                 "records")
"""The arrays of every detailed result, in the order they are written."""
REASONING_ARRAYS: Final = ("ttfats", "reasoning_lens", "answer_lens")
"""The arrays written only when some measured request reasoned."""

_READ_BYTES = 1 << 20


def _seconds(ns: int | None) -> float | None:
    return None if ns is None else ns / NS_PER_S


def measured_elements(record: RequestRecord) -> dict[str, Any]:
    """One measured request's element of each vLLM array (seconds, as vLLM writes them)."""
    return {
        "input_lens": record.input_tokens,
        "output_lens": record.output_tokens,
        "ttfts": _seconds(ttft_ns(record)),
        "itls": [gap / NS_PER_S for gap in itl_ns(record)],
        "generated_texts": record.generated_text or "",
        "errors": record.error or "",
        "ttfats": _seconds(ttfat_ns(record)),
        "reasoning_lens": record.reasoning_tokens,
        "answer_lens": record.answer_tokens,
    }


class DetailedParts:
    """The detailed arrays of one run, in anonymous temporary files (nothing is left on disk
    after :meth:`close`, an exception or a killed process)."""

    def __init__(self) -> None:
        self._files: dict[str, IO[bytes]] = {}
        self._counts: dict[str, int] = {}
        self.reasoned = False
        """Whether a measured request reasoned (the reasoning arrays are then written)."""
        self.failure: str | None = None
        """Why the parts could not be kept (a full temporary directory...): the run goes on,
        and the result is written without its detailed arrays."""
        for name in (*ARRAYS, *REASONING_ARRAYS):
            # Held open until close(): one file per array for the whole run.
            self._files[name] = tempfile.TemporaryFile(prefix="tunegate-detailed-")  # noqa: SIM115
            self._counts[name] = 0

    def _append(self, name: str, value: Any) -> None:
        text = json.dumps(value, allow_nan=False)
        handle = self._files[name]
        handle.write((text if not self._counts[name] else ",\n    " + text).encode("utf-8"))
        self._counts[name] += 1

    def add(self, record: RequestRecord) -> None:
        """Write one record (and, unless it is warm-up, its elements of the arrays). A write
        that fails (disk full) stops the parts, never the run: see :attr:`failure`."""
        if self.failure is not None:
            return
        try:
            self._append("records", record.to_dict())
            if record.warmup:
                return
            self.reasoned = self.reasoned or record.reasoning_streamed \
                or bool(record.usage_reasoning_tokens)
            for name, value in measured_elements(record).items():
                self._append(name, value)
        except OSError as exc:
            self.failure = f"{exc.strerror or exc} in {tempfile.gettempdir()}"
            self.close()

    def __len__(self) -> int:
        """Records written."""
        return self._counts["records"]

    def chunks(self, document: Mapping[str, Any]) -> Iterator[bytes]:
        """The whole result file: ``document`` (JSON-ready) followed by every array. Each call
        reads the parts from their start, so a failed write can be retried elsewhere."""
        head = json.dumps(document, indent=2, allow_nan=False)
        if not head.endswith("}"):  # pragma: no cover - a mapping always dumps as an object
            raise ValueError("the document is not a JSON object")
        body = head[:-1].rstrip()
        yield (body + ("," if document else "")).encode("utf-8")
        names = [*ARRAYS, *(REASONING_ARRAYS if self.reasoned else ())]
        for position, name in enumerate(names):
            yield f'\n  {json.dumps(name)}: [\n    '.encode()
            handle = self._files[name]
            handle.flush()
            handle.seek(0)
            while block := handle.read(_READ_BYTES):
                yield block
            handle.seek(0, 2)  # later add()s append at the end
            yield b"\n  ]" + (b"," if position < len(names) - 1 else b"")
        yield b"\n}\n"

    def close(self) -> None:
        """Remove the parts."""
        for handle in self._files.values():
            handle.close()

    def __enter__(self) -> DetailedParts:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
