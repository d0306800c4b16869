"""The model probe's messages (issue 13, "Data loss and security").

Specification: when ``/v1/models`` cannot be read, the one-line message names the server by a
URL without ``user:password@`` and never quotes the API key.
"""

from __future__ import annotations

import socket

import pytest

from tunegate.errors import UsageError
from tunegate.loadgen.probe import discover_model


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("url", ["http://tuner:Zq9xW7@127.0.0.1:{port}",
                                 "http://tuner:Zq9xW7@[::1:{port}"])
def test_an_unreachable_server_is_named_without_its_password(url: str) -> None:
    with pytest.raises(UsageError) as refused:
        discover_model(url.format(port=_closed_port()), api_key="sk-Zq9xW7", timeout_s=2)
    message = str(refused.value)
    assert "Zq9x" not in message and "\n" not in message
    assert "pass --model NAME" in message
