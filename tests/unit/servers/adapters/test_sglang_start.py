"""SGLang's start, end to end against a stand-in engine: the API key, and what the engine runs.

The stand-in reads its arguments the way ``sglang.launch_server`` does (``--config FILE``
merged in-process), answers ``/health`` only with the key, and reports resolved arguments at
``/server_info``, deciding ``enable_mixed_chunk`` itself as SGLang's resolution may.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tunegate.servers.adapters import ServerConfig, SGLangAdapter
from tunegate.servers.verify import StepStatus, check_engine_args

pytestmark = pytest.mark.integration

FAKE = '''
import json, sys, yaml
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
argv = sys.argv[1:]
key = None
if "--config" in argv:
    i = argv.index("--config")
    key = yaml.safe_load(open(argv[i + 1]))["api-key"]
    del argv[i:i + 2]
args = dict(zip(argv[::2], argv[1::2]))
print("engine args:", sys.argv[1:], "key from file:", key, flush=True)
resolved = {"max_running_requests": int(args.get("--max-running-requests", 0)),
            "enable_mixed_chunk": True, "api_key": key}

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self.send_error(401); return
        body = json.dumps(resolved if self.path == "/server_info" else {}).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass

ThreadingHTTPServer(("127.0.0.1", int(args["--port"])), H).serve_forever()
'''


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_key_reaches_sglang_through_a_file_never_through_argv(tmp_path: Path) -> None:
    fake = tmp_path / "fake_sglang.py"
    fake.write_text(FAKE)
    adapter = SGLangAdapter(executable=[sys.executable, str(fake)], uses_accelerator=False,
                            startup_budget_s=20, stop_grace_s=2)
    config = ServerConfig("m", {"max_running_requests": 64, "enable_mixed_chunk": False},
                          port=_port(), api_key="sk-sglang-secret-7")
    logs = tmp_path / "logs"
    process = adapter.start(config, logs)  # healthy only if the engine got the key
    try:
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")
        assert b"--config" in cmdline and not any(b"sk-sglang" in part for part in cmdline)
        assert not list(logs.glob("*.secret.yaml"))  # read at start-up, then removed
        check = adapter.engine_args_check(config)
        assert check is not None
        status, detail, unverified = check_engine_args(process.base_url, check,
                                                       api_key=config.api_key)
    finally:
        adapter.stop(process)
    assert status is StepStatus.FAILED and unverified == ()
    assert "enable_mixed_chunk: the config records False, the engine runs True" in detail
    assert "sk-sglang" not in detail
    log = process.log_path.read_text()
    assert "key from file: ***" in log and "sk-sglang-secret-7" not in log
