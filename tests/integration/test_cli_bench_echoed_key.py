"""A server that echoes the API key back (issue 13, "Data loss and security").

Specification: whatever a server sends back holding the ``Authorization`` header it received
(a 401's JSON error, a plain-text 403 in upper case, a percent-encoded 400, a 500 body whose
first piece ends in the middle of the key, ``event: error``, an unreadable chunk, an in-band
error object, the generated text itself, an unreadable JSON body), ``tunegate bench --api-key
KEY --out F --save-detailed`` writes no byte of the key to ``F``, stdout or stderr, in any case
or encoding the server used, while each request's error still says what happened
(``Bearer ***``).
Also ``bench --out /dev/full`` (or a FIFO) is refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from aiohttp import web

from tunegate.cli import main

pytestmark = pytest.mark.integration

KEY = "sk-Echoed/Key+NEVER=42"


def _sse(*events: str) -> bytes:
    return "".join(f"{e}\n\n" for e in events).encode()


def _delta(text: str) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "text": text,
                                               "finish_reason": None}]})


async def _completions(request: web.Request) -> web.StreamResponse:
    """Request ``i`` (from ``X-Request-Id``) gets echo number ``i``."""
    auth = request.headers.get("Authorization", "")
    index = int(request.headers["X-Request-Id"].rsplit("-", 1)[1])
    await request.read()
    if index == 0:
        return web.json_response({"error": {"message": f"invalid key: {auth}"}}, status=401)
    if index == 1:
        return web.Response(text=f"FORBIDDEN: AUTHORIZATION: {auth.upper()}", status=403)
    if index == 2:
        return web.Response(text=f"bad request from {quote(auth, safe='')} "
                                 f"and {quote_plus(auth).lower()}", status=400)
    if index == 3:  # the body arrives in two pieces, cut in the middle of the key
        cut = len("Bearer sk-Ech")
        error = web.StreamResponse(status=500, headers={"Content-Type": "text/plain"})
        await error.prepare(request)
        await error.write(f"error: {auth[:cut]}".encode())
        await asyncio.sleep(0.3)
        await error.write(f"{auth[cut:]} and more".encode())
        await error.write_eof()
        return error
    if index == 8:
        return web.Response(text=f"{{not json, {auth}", content_type="application/json")
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await stream.prepare(request)
    body = {
        4: _sse(_delta("a"), f"event: error\ndata: {json.dumps({'message': auth})}"),
        5: _sse(_delta("a"), f"data: {{broken {auth}"),
        6: _sse(_delta("a"), "data: " + json.dumps({"error": {"message": f"you sent {auth}"}})),
        7: _sse(_delta(f"your key is {auth}"), _delta(f" ({KEY.lower()})"), "data: [DONE]"),
    }[index]
    await stream.write(body)
    await stream.write_eof()
    return stream


@pytest.fixture
def echo_server() -> Iterator[str]:
    """The echoing server on a loopback port, served from a background thread."""
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/completions", _completions)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def _forms(secret: str) -> list[str]:
    return [f for s in (secret, secret[:-1], secret[1:])
            for f in (s, quote(s, safe=""), quote(s), quote_plus(s))]


def test_an_echoed_api_key_reaches_no_file_and_no_console(
        echo_server: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(["bench", "--url", echo_server, "--model", "m", "--api-key", KEY,
                 "--num-requests", "9", "--concurrency", "1", "--input-tokens", "4",
                 "--output-tokens", "4", "--no-progress", "--request-timeout", "10",
                 "--no-metrics", "--out", str(out), "--save-detailed"])
    captured = capfd.readouterr()
    assert code != 2, captured.err
    written = out.read_bytes().decode()
    for text in (written, captured.out, captured.err):
        folded = text.casefold()
        for form in _forms(KEY):
            assert form.casefold() not in folded
    doc = json.loads(written)
    errors = {r["index"]: r["error"] for r in doc["records"]}
    assert errors[0] == "HTTP 401: invalid key: Bearer ***"
    assert errors[1] == "HTTP 403: FORBIDDEN: AUTHORIZATION: BEARER ***"
    assert errors[3] == "HTTP 500: error: Bearer ***"  # the first piece, half a key masked
    assert "***" in errors[2] and "***" in errors[5] and "***" in errors[8]
    assert errors[4] == 'event: error: {"message": "Bearer ***"}'
    assert errors[6] == "in-band error: you sent Bearer ***"
    assert errors[7] is None
    assert doc["generated_texts"][7] == "your key is Bearer *** (***)"


def full_device(tmp: Path) -> Path:
    """A ``/dev/full`` that a failing test cannot destroy: as root (who could rename over the
    real one) a fresh node in ``tmp``; otherwise the real one, whose directory is not ours."""
    if os.geteuid() == 0:
        try:
            os.mknod(tmp / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
        except OSError as exc:
            pytest.skip(f"cannot make a device node here ({exc.strerror})")
        return tmp / "full"
    if not os.path.exists("/dev/full") or os.access("/dev", os.W_OK):
        pytest.skip("no /dev/full that is safe to aim at")
    return Path("/dev/full")


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_bench_out_to_a_device_or_a_fifo_is_refused_before_measuring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    if kind == "device":
        out, what = full_device(tmp_path), "is a character device"
    else:
        out, what = tmp_path / "pipe", "is a named pipe (FIFO)"
        os.mkfifo(out)
    code = main(["bench", "--url", "http://127.0.0.1:9", "--model", "m", "--num-requests",
                 "2", "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and str(out) in err and what in err
    assert out.is_char_device() if kind == "device" else out.is_fifo()
