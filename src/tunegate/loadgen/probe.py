"""Small read-only requests to a server before a benchmark (which model does it serve?).

Messages name the server by its URL without credentials and never quote the API key, even when
an error's text echoes it.
"""

from __future__ import annotations

import asyncio

import aiohttp

from tunegate.errors import UsageError
from tunegate.loadgen.client import redact_url
from tunegate.loadgen.redact import mask_secrets, mask_url_password, url_password

__all__ = ["check_reachable", "discover_model"]


async def _list_models(base_url: str, api_key: str | None, timeout_s: float) -> list[str]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    url = base_url.rstrip("/") + "/v1/models"
    shown = _shown(url)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url, headers=headers) as response,
    ):
        if response.status != 200:
            raise UsageError(
                f"{shown} answered HTTP {response.status}; pass --model NAME explicitly"
            )
        payload = await response.json(content_type=None)
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise UsageError(f"{shown} did not return a model list; pass --model NAME explicitly")
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


def _shown(url: str) -> str:
    """``url`` for a message: without ``user:password@``, even when it is malformed."""
    try:
        return redact_url(url)
    except ValueError:
        return mask_url_password(url)


def discover_model(base_url: str, api_key: str | None = None, timeout_s: float = 10.0) -> str:
    """The first model a server lists at ``/v1/models`` (what vLLM's bench does without --model).

    Raises:
        UsageError: The server is unreachable or lists no model; the message says what to do.
    """
    try:
        models = asyncio.run(_list_models(base_url, api_key, timeout_s))
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        url = _shown(base_url.rstrip("/") + "/v1/models")
        why = mask_secrets(str(exc), [api_key, url_password(base_url)])
        raise UsageError(
            f"cannot reach {url} ({type(exc).__name__}: {why}); "
            "check --url, start the server, or pass --model NAME"
        ) from None
    if not models:
        raise UsageError(f"{_shown(base_url)} lists no model; pass --model NAME")
    return models[0]


async def _answer_status(url: str, api_key: str | None, timeout_s: float) -> int:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
        session.get(url, headers=headers) as response,
    ):
        return response.status


def check_reachable(base_url: str, api_key: str | None = None, timeout_s: float = 10.0) -> None:
    """Something answers HTTP at ``base_url`` (any status counts: a server without
    ``/v1/models`` is still there). For a long run that must not start against nothing.

    Raises:
        UsageError: Nothing answers; the message names the URL and what to do.
    """
    url = base_url.rstrip("/") + "/v1/models"
    try:
        asyncio.run(_answer_status(url, api_key, timeout_s))
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        why = mask_secrets(str(exc), [api_key, url_password(base_url)])
        raise UsageError(f"cannot reach {_shown(url)} ({type(exc).__name__}: {why}); check "
                         "--url or start the server") from None
