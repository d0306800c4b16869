"""Issue 13: a failed start keeps what the server said, and only a bounded tail of it.

:func:`~tunegate.servers.lifecycle.start_with_verification` returns the server's last lines of
output when it started but failed verification (a start that failed outright carries them in
its ``start`` step), so the tuner can quote the engine's complaint. The tail read from the log
is bounded: an engine that logged for hours, or printed one line without end, is not read whole
and not quoted whole.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from tunegate.servers.adapters import ServerConfig
from tunegate.servers.launch import TAIL_CHARS, LaunchSpec, ServerProcess
from tunegate.servers.lifecycle import start_with_verification
from tunegate.servers.verify import StepResult, StepStatus, VerificationReport


def process_with_log(path: Path) -> ServerProcess:
    return ServerProcess(LaunchSpec(("engine",)), cast("subprocess.Popen[bytes]", None), path,
                         0.0)


def test_the_tail_is_the_end_of_a_long_log(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("# tunegate: launching engine\n" + "loading shard\n" * 500_000
                   + "ValueError: unknown argument --max-num-seqz\n", encoding="utf-8")
    tail = process_with_log(log).log_tail()
    assert tail.endswith("loading shard | ValueError: unknown argument --max-num-seqz")
    assert len(tail) <= TAIL_CHARS + 3


def test_one_endless_line_is_cut_to_its_end(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("x" * 5_000_000 + "the end", encoding="utf-8")
    tail = process_with_log(log).log_tail()
    assert tail.startswith("...") and tail.endswith("the end")
    assert len(tail) == TAIL_CHARS + 3


@dataclass
class Handle:
    said: str

    def log_tail(self) -> str:
        return self.said


class Unverifiable:
    """Starts, then fails verification: the model it serves is not the one asked for."""

    name = "fake"

    def start(self, config: ServerConfig, log_dir: Path | str, *,
              budget: float | None = None) -> Handle:
        return Handle("serving model 'other' | WARNING: --served-model-name ignored")

    def stop(self, handle: Handle) -> None:
        pass

    def verify(self, handle: Handle, config: ServerConfig) -> VerificationReport:
        return VerificationReport(self.name, "fake://", [
            StepResult("model", StepStatus.FAILED, "/v1/models lists 'other', not 'm'")])


def test_a_start_that_fails_verification_keeps_the_server_s_last_output(tmp_path: Path) -> None:
    started = start_with_verification(Unverifiable(), ServerConfig("m", {}), log_dir=tmp_path)
    assert not started.ok
    assert started.server_output == "serving model 'other' | WARNING: --served-model-name ignored"
