"""VERIFY_START: a start whose engine did not report some parameters says so in the story.

SGLang reports the arguments it runs, but not every one (``/server_info`` leaves some out): the
run continues, and what could not be verified is visible instead of passing silently.
"""

from __future__ import annotations

from pathlib import Path

from tunegate.servers.lifecycle import RestartStatus
from tunegate.tuner.driver import Tuner
from tunegate.tuner.handlers import verify_start
from tunegate.tuner.outcomes import Candidate
from tunegate.tuner.seed_story import default_config
from tunegate.tuner.states import Event


def _tuner(tmp_path: Path, unverified: list[str]) -> tuple[Tuner, list[str]]:
    said: list[str] = []
    tuner = Tuner(default_config(), tmp_path / "run", say=said.append)
    tuner.rs.candidate = Candidate(trial=3)
    tuner.rs.last_restart = {"status": RestartStatus.STARTED.value,
                             "report": {"unverified": unverified}}
    return tuner, said


def test_unverified_parameters_are_named_in_the_story(tmp_path: Path) -> None:
    tuner, said = _tuner(tmp_path, ["schedule_conservativeness", "enable_mixed_chunk"])
    assert verify_start.handle(tuner.ctx) is Event.OK
    line = ("trial 3 started; not verified (the engine does not report them): "
            "schedule_conservativeness, enable_mixed_chunk")
    assert tuner.rs.story[-1] == line and said[-1] == line


def test_a_fully_verified_start_adds_nothing(tmp_path: Path) -> None:
    tuner, said = _tuner(tmp_path, [])
    story = list(tuner.rs.story)
    assert verify_start.handle(tuner.ctx) is Event.OK
    assert tuner.rs.story == story and said == []
