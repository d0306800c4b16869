"""Read-only GETs that say which engine serves and what it runs (for the fingerprint).

Endpoints (each engine's own, as its sources define them):

* vLLM ``GET /version``: ``{"version": "0.6.3"}`` (``vllm/entrypoints/openai/api_server.py``,
  ``show_version``); the simulator answers it the same way.
* SGLang ``GET /server_info`` (newer) and ``GET /get_server_info`` (older, later a deprecated
  alias): the server arguments (``model_path``, ``served_model_name``...), the scheduler's
  facts and ``"version"`` (``sglang/srt/entrypoints/http_server.py``).
* llama.cpp's ``llama-server`` ``GET /props``: ``build_info`` (``b<build>-<commit>``),
  ``model_path``, ``model_alias``, ``total_slots``... (``tools/server``'s ``handle_props``).
* ``GET /v1/models`` everywhere: served names, and ``owned_by`` (``vllm``, ``sglang``,
  ``llamacpp``, ``tunegate-sim``) and ``root`` (vLLM: the model's path or hub id).

All GETs run at once with one deadline (a few seconds), the API key as a bearer token.
Nothing raises for a server problem: each path's :class:`InfoAnswer` holds the parsed JSON or
why there is none, in words that never hold the API key or a URL password.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from tunegate.loadgen.client import redact_url
from tunegate.loadgen.redact import mask_secrets, mask_url_password, url_password

__all__ = ["INFO_PATHS", "MAX_INFO_BYTES", "InfoAnswer", "get_server_info"]

INFO_PATHS = ("/version", "/server_info", "/get_server_info", "/props", "/v1/models")
"""Every info endpoint tunegate knows, in the order to try them."""

MAX_INFO_BYTES = 4 << 20
"""Most bytes read from one answer (SGLang's server info is tens of kilobytes)."""


@dataclass(frozen=True, slots=True)
class InfoAnswer:
    """What one GET gave.

    Attributes:
        path: The path asked (``/version``).
        status: The HTTP status, ``None`` when nothing answered.
        body: The JSON it returned (only with status 200), else ``None``.
        error: Why there is no usable body, else ``None`` (never holds a secret).
    """

    path: str
    status: int | None
    body: Any
    error: str | None

    @property
    def ok(self) -> bool:
        """Status 200 with a JSON body."""
        return self.error is None


def _shown(url: str) -> str:
    try:
        return redact_url(url)
    except ValueError:
        return mask_url_password(url)


async def _get(session: aiohttp.ClientSession, root: str, path: str,
               headers: dict[str, str], secrets: list[str | None]) -> InfoAnswer:
    url = root + path
    try:
        async with session.get(url, headers=headers, allow_redirects=False) as response:
            if response.status != 200:
                return InfoAnswer(path, response.status, None,
                                  f"GET {path} answered HTTP {response.status}")
            raw = await response.content.read(MAX_INFO_BYTES + 1)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        why = mask_secrets(str(exc), secrets) or type(exc).__name__
        return InfoAnswer(path, None, None,
                          f"GET {_shown(url)} failed ({type(exc).__name__}: {why})")
    if len(raw) > MAX_INFO_BYTES:
        return InfoAnswer(path, 200, None,
                          f"GET {path} answered more than {MAX_INFO_BYTES >> 20} MiB")
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: absurd nesting
        return InfoAnswer(path, 200, None, f"GET {path} answered HTTP 200 without JSON")
    return InfoAnswer(path, 200, body, None)


async def _get_all(root: str, paths: Sequence[str], api_key: str | None,
                   timeout_s: float) -> dict[str, InfoAnswer]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    secrets = [api_key, url_password(root)]
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        answers = await asyncio.gather(*(_get(session, root, p, headers, secrets)
                                         for p in paths))
    return {answer.path: answer for answer in answers}


def get_server_info(base_url: str, paths: Sequence[str] = INFO_PATHS, *,
                    api_key: str | None = None,
                    timeout_s: float = 3.0) -> dict[str, InfoAnswer]:
    """GET each of ``paths`` under ``base_url`` at once; path -> :class:`InfoAnswer`.

    Never raises for a server that is down, slow or strange (see the module docstring). Safe
    to call from a thread whose event loop is running (the GETs then run in another thread).

    Args:
        base_url: The server root (``http://host:port``; a trailing ``/v1`` is dropped).
        paths: Paths to ask, each starting with ``/``.
        api_key: Sent as ``Authorization: Bearer``; never in an answer's text.
        timeout_s: Deadline for all of them together.
    """
    root = base_url.rstrip("/").removesuffix("/v1")
    work = _get_all(root, list(dict.fromkeys(paths)), api_key, timeout_s)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, work).result()
