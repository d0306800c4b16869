"""The only client-side network code: SSE parsing, the HTTP client, the runner, the records."""

from __future__ import annotations

from tunegate.loadgen.records import CountSource, Outcome, RequestRecord

__all__ = ["CountSource", "Outcome", "RequestRecord"]
