"""How the client talks to the server under test, and URLs made safe to show."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tunegate.loadgen.openai import Endpoint, endpoint_path

__all__ = ["ClientConfig", "redact_url"]


def redact_url(url: str) -> str:
    """The URL without any ``user:password@`` part, safe for files, logs and messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to talk to the server under test.

    Attributes:
        base_url: Server root, e.g. ``http://127.0.0.1:8000`` (no ``/v1``).
        model: Model name sent in each request.
        endpoint: ``completions`` or ``chat``.
        stream: Ask for SSE streaming. Off only to reproduce a broken gauge on purpose.
        ignore_eos: Ask the server to generate exactly ``max_tokens``.
        include_usage: Ask for the final usage chunk (``stream_options.include_usage``).
        api_key: Sent as a bearer token; never printed (excluded from ``repr``).
        request_timeout_s: Deadline of one request, connection to last byte.
        extra_body: Extra JSON fields merged into every request body.
        keep_text: Keep generated text in the records (``--save-detailed``).
        run_id: Prefix of the ``X-Request-Id`` header, so server logs can be joined to records.
        kernel_receipts: Take each read's time from the kernel, when the bytes reached the
            host, where the kernel gives it (Linux, :mod:`.kernel_stamps`); off, the time the
            client's read callback ran (to measure what the kernel's time saves).
    """

    base_url: str
    model: str
    endpoint: Endpoint = "completions"
    stream: bool = True
    ignore_eos: bool = True
    include_usage: bool = True
    api_key: str | None = field(default=None, repr=False)
    request_timeout_s: float = 300.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    keep_text: bool = False
    run_id: str = "tunegate"
    kernel_receipts: bool = True

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + endpoint_path(self.endpoint)
