"""Small read-only requests to a server before a benchmark (which model does it serve?)."""

from __future__ import annotations

import asyncio

import aiohttp

from tunegate.errors import UsageError

__all__ = ["discover_model"]


async def _list_models(base_url: str, api_key: str | None, timeout_s: float) -> list[str]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    url = base_url.rstrip("/") + "/v1/models"
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url, headers=headers) as response,
    ):
        if response.status != 200:
            raise UsageError(
                f"{url} answered HTTP {response.status}; pass --model NAME explicitly"
            )
        payload = await response.json(content_type=None)
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise UsageError(f"{url} did not return a model list; pass --model NAME explicitly")
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


def discover_model(base_url: str, api_key: str | None = None, timeout_s: float = 10.0) -> str:
    """The first model a server lists at ``/v1/models`` (what vLLM's bench does without --model).

    Raises:
        UsageError: The server is unreachable or lists no model; the message says what to do.
    """
    try:
        models = asyncio.run(_list_models(base_url, api_key, timeout_s))
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise UsageError(
            f"cannot reach {base_url.rstrip('/')}/v1/models ({type(exc).__name__}: {exc}); "
            "check --url, start the server, or pass --model NAME"
        ) from None
    if not models:
        raise UsageError(f"{base_url} lists no model; pass --model NAME")
    return models[0]
