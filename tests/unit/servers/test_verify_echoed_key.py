"""Verification against a server that echoes the API key (issue 13, "Data loss and security").

Specification: the steps' details quote what the server said (model ids, error bodies, engine
arguments); when that holds the key it was sent, the report (journalled, printed) holds
``***`` instead, in any letter case.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tunegate.servers.verify import EngineArgsCheck, verify_server

KEY = "sk-Verify-Echo-31337"


@pytest.fixture
def echo_server() -> Iterator[str]:
    """Every answer quotes the ``Authorization`` header it got."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization", "")
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"data": [{"id": auth}, {"id": auth.upper()}]})
            elif self.path == "/server_info":
                self._send(200, {"tp_size": auth.lower()})
            else:
                self._send(404, {"error": auth})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._send(401, {"error": {"message": f"invalid key {self.headers['Authorization']}"}})

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_echoed_key_is_masked_in_every_step_detail(echo_server: str) -> None:
    report = verify_server(echo_server, "m", api_key=KEY, metric_prefix="vllm:",
                           accelerator=None,
                           engine_args=EngineArgsCheck({"tp_size": 1}, ("/server_info",)))
    shown = (json.dumps(report.to_dict()) + report.summary()).casefold()
    assert KEY.casefold() not in shown
    assert "lists ['bearer ***', 'bearer ***']" in shown  # the model step: ids masked
    assert "http 401: invalid key bearer ***" in shown  # the completion step
    assert "the engine runs 'bearer ***'" in shown  # the engine arguments step
