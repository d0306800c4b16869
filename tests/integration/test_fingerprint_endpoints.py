"""get_server_info over real loopback sockets: the key goes out as a bearer token and never
comes back in a message; a slow, broken or absent server is an answer, never an exception."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web

from tunegate.loadgen.server_info import get_server_info

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SECRET = "sk-test-NEVER-PRINT-ME"


def _app(seen: list[str]) -> web.Application:
    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"version": "0.6.3"})

    async def echo_401(request: web.Request) -> web.Response:
        return web.json_response({"error": f"bad key {request.headers.get('Authorization')}"},
                                 status=401)

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(3)  # past the 1-s deadline
        return web.json_response({})

    async def html(request: web.Request) -> web.Response:
        return web.Response(text="<html>not json</html>", content_type="text/html")

    async def deep(request: web.Request) -> web.Response:  # deeper than json.loads recurses
        return web.Response(text="[" * 100_000 + "]" * 100_000, content_type="application/json")

    app = web.Application()
    for path, handler in (("/version", version), ("/server_info", echo_401), ("/props", slow),
                          ("/get_server_info", html), ("/deep", deep)):
        app.router.add_get(path, handler)
    return app


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """A server in a thread: /version ok, /server_info 401, /props never answers,
    /get_server_info HTML, /v1/models absent (404)."""
    seen: list[str] = []
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app(seen))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.SockSite(runner, sock).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_each_path_gets_its_own_answer(server: tuple[str, list[str]]) -> None:
    url, seen = server
    answers = get_server_info(url + "/v1", api_key=SECRET, timeout_s=1.0)
    assert answers["/version"].ok and answers["/version"].body == {"version": "0.6.3"}
    assert seen == [f"Bearer {SECRET}"]
    assert (answers["/server_info"].status, answers["/server_info"].error) == (
        401, "GET /server_info answered HTTP 401")
    assert answers["/get_server_info"].error == "GET /get_server_info answered HTTP 200 " \
                                                "without JSON"
    assert answers["/v1/models"].status == 404
    slow = answers["/props"]
    assert slow.status is None and slow.error is not None and "Timeout" in slow.error
    for answer in answers.values():
        assert SECRET not in repr(answer)


def test_nothing_listening_is_an_answer_that_masks_the_url_password() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the GET: refused
    answers = get_server_info(f"http://tuner:hunter2@127.0.0.1:{port}", ["/version"],
                              api_key=SECRET, timeout_s=2.0)
    error = answers["/version"].error
    assert error is not None and error.startswith("GET http://127.0.0.1:") and "failed" in error
    assert "hunter2" not in error and SECRET not in error


def test_it_works_from_inside_a_running_event_loop(server: tuple[str, list[str]]) -> None:
    url, _ = server

    async def inside() -> bool:
        return get_server_info(url, ["/version"], timeout_s=2.0)["/version"].ok

    assert asyncio.run(inside())



def test_absurdly_nested_json_is_no_json_not_a_crash(server: tuple[str, list[str]]) -> None:
    url, _ = server
    answer = get_server_info(url, ["/deep"], timeout_s=2.0)["/deep"]
    assert answer.error == "GET /deep answered HTTP 200 without JSON"
