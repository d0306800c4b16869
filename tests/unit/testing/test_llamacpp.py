"""The llama-server helpers that need no binary: discovery, argv, errors."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tunegate.errors import ServerError
from tunegate.testing import llamacpp
from tunegate.testing.llamacpp import (
    LLAMA_CPP_PYTHON_VERSION,
    find_llama_server,
    free_cores,
    free_loopback_port,
    llama_server_argv,
    running_llama_server,
    usable_cores,
)

SCRIPT = Path(__file__).parents[3] / "scripts" / "build_llama_server.sh"


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_build_script_default_version_matches_the_python_constant() -> None:
    match = re.search(r'LLAMA_CPP_PYTHON_VERSION:-([0-9.]+)\}', SCRIPT.read_text())
    assert match and match.group(1) == LLAMA_CPP_PYTHON_VERSION


def test_env_override_wins_and_a_bad_one_is_an_error(tmp_path: Path, monkeypatch) -> None:
    binary = _executable(tmp_path / "my-llama-server")
    monkeypatch.setenv("TUNEGATE_LLAMA_SERVER", str(binary))
    assert find_llama_server() == binary
    monkeypatch.setenv("TUNEGATE_LLAMA_SERVER", str(tmp_path / "missing"))
    with pytest.raises(ServerError, match="not an executable file"):
        find_llama_server()


def test_cache_is_searched_before_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("TUNEGATE_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("TUNEGATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_llama_server() is None
    on_path = _executable(tmp_path / "bin" / "llama-server")
    assert find_llama_server() == on_path
    other = _executable(tmp_path / "cache" / "llama.cpp" / "0.0.1" / "llama-server")
    assert find_llama_server() == other
    cached = _executable(tmp_path / "cache" / "llama.cpp" / LLAMA_CPP_PYTHON_VERSION
                         / "llama-server")
    assert find_llama_server() == cached


def test_argv_is_a_list_of_strings_with_the_flags_asked_for() -> None:
    argv = llama_server_argv(Path("/bin/llama-server"), Path("/m.gguf"), port=8123, parallel=4,
                             threads=2, ctx=4096, extra_args=["-b", "256"])
    assert argv[0] == "/bin/llama-server" and all(isinstance(a, str) for a in argv)
    joined = " ".join(argv)
    for flag in ("--model /m.gguf", "--host 127.0.0.1", "--port 8123", "--parallel 4",
                 "--threads 2", "--ctx-size 4096", "--metrics", "-b 256"):
        assert flag in joined
    assert "--ctx-size" not in llama_server_argv(Path("x"), Path("m"), port=1, metrics=False)


def test_core_and_port_helpers() -> None:
    assert 1 <= free_cores() <= usable_cores() <= (os.cpu_count() or 1)
    assert 1024 <= free_loopback_port() <= 65535


def test_start_errors_name_the_cause(tmp_path: Path, monkeypatch) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"not a model")
    monkeypatch.setattr(llamacpp, "find_llama_server", lambda: None)
    with pytest.raises(ServerError, match="make llama-server"), running_llama_server(model):
        pass
    fake = _executable(tmp_path / "fake-server")
    with pytest.raises(ServerError, match="does not exist"), \
            running_llama_server(tmp_path / "missing.gguf", binary=fake):
        pass
    with pytest.raises(ServerError, match="threads=999"), \
            running_llama_server(model, binary=fake, threads=999):
        pass
    fake.write_text("#!/bin/sh\necho 'error: failed to load model' >&2\nexit 3\n")
    with pytest.raises(ServerError, match=r"exited with code 3.*failed to load model"), \
            running_llama_server(model, binary=fake, threads=1):
        pass


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and /bin/sh")
def test_a_server_that_never_gets_healthy_is_stopped(tmp_path: Path) -> None:
    fake = tmp_path / "hang"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    with pytest.raises(ServerError, match="did not become healthy"), \
            running_llama_server(model, binary=fake, threads=1, start_timeout_s=0.5):
        pass


def test_build_script_parses_and_is_strict() -> None:
    import subprocess

    text = SCRIPT.read_text()
    assert "set -euo pipefail" in text and "-DGGML_NATIVE=OFF" in text
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0
