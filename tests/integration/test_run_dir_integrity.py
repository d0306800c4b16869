"""A tuning run directory is private, holds no secret, and is tamper-evident as a whole.

One real run on the ``simulator-virtual`` adapter (``fast`` scenario, 4 proposals: three kept,
one rejected, plots on) with two secrets in ``[server] env``: ``HF_TOKEN`` (masked by its name)
and ``MY_VAR`` (masked because ``[server] secret_env`` lists it). Each test works on a copy.

- Masking: neither secret is in any byte of any file of the run directory; the engine got both.
- Modes: every directory ``0700``, every file ``0600``.
- Tampering (issue 13's list): ``kept.json`` edited to a rejected trial or an out-of-bounds
  value, a gate decision forged with recomputed hashes, a middle decision deleted and the rest
  renumbered, a measurement file edited or deleted, ``journal.jsonl`` emptied, ``kept.json``
  deleted: ``tunegate replay`` exits 1 naming the file; ``tunegate rollback`` refuses a
  ``kept.json`` the chain does not vouch for (exit 2, one line, nothing started).
- A run directory written before chaining still replays, and says "no chain".
"""

from __future__ import annotations

import json
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.servers.engine import VirtualEngine
from tunegate.tuner.decisions import digest

pytestmark = pytest.mark.integration

HF_TOKEN = "hf_tunegateTestSecret4242"
MY_VAR = "declared-secret-9a7b"
SECRETS = {"HF_TOKEN": HF_TOKEN, "MY_VAR": MY_VAR}

CONFIG = f"""
[run]
budget = 4
seed = 3
recheck_every = 0

[server]
adapter = "simulator-virtual"
scenario = "fast"
env = {{ HF_TOKEN = "{HF_TOKEN}", MY_VAR = "{MY_VAR}", PLAIN = "visible" }}
secret_env = ["MY_VAR"]

[workload]
dataset = "synthetic"
num_requests = 32
input_tokens = "64"
output_tokens = "16"
concurrency = 16

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 1
high = 64
default = 1

[objective]
metric = "output_throughput"

[gate]
repeats = 2
initial_repeats = 2

[search]
early_stopping = false

[report]
plots = true
"""

Run = Callable[..., tuple[int, str, str]]


class RememberingEngine(VirtualEngine):
    """The ``simulator-virtual`` engine, remembering the last server it ran: the run stops it
    when it ends, and the test reads what that server was started with."""

    last_handle: Any = None

    def stop(self) -> None:
        if self.handle is not None:
            self.last_handle = self.handle
        super().stop()


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """The finished run directory and the engine it ran on (run once for the module)."""
    from tunegate.tuner.config import load_config
    from tunegate.tuner.driver import Tuner, default_engine

    root = tmp_path_factory.mktemp("integrity")
    (root / "tune.toml").write_text(CONFIG, encoding="utf-8")
    config = load_config(root / "tune.toml")
    virtual = default_engine(config, root / "run")
    assert isinstance(virtual, VirtualEngine)
    engine = RememberingEngine(virtual.simulator, virtual.service_id)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNEGATE_LOCK_DIR", str(root / "locks"))
        Tuner(config, root / "run", engine=engine).run()
    yield root / "run", engine


@pytest.fixture
def run_dir(original: tuple[Path, Any], tmp_path: Path) -> Path:
    """A copy of the finished run, free to tamper with."""
    copy = tmp_path / "run"
    shutil.copytree(original[0], copy)
    return copy


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> Run:
    """``cli("replay", ...)`` -> (exit code, stdout, stderr), leases under ``tmp_path``."""
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("COLUMNS", "400")  # one problem per line, unwrapped
    monkeypatch.delenv("TUNEGATE_DEBUG", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


# ---- masking and modes ---------------------------------------------------------------------
def every_file(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.rglob("*") if p.is_file())


def test_no_secret_reaches_any_byte_of_the_run_directory(original: tuple[Path, Any]) -> None:
    run_dir, engine = original
    files = every_file(run_dir)
    assert {p.name for p in files} >= {"journal.jsonl", "decisions.jsonl", "summary.json",
                                       "report.md", "kept.json", "simulator-virtual.log",
                                       "study.db"}
    for path in files:
        content = path.read_bytes()
        for name, secret in SECRETS.items():
            assert secret.encode() not in content, f"{name}'s value is in {path}"
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_bytes().splitlines()]
    config = next(r["data"] for r in journal if r["type"] == "config")
    assert config["server"]["env"] == {"HF_TOKEN": "***", "MY_VAR": "***", "PLAIN": "visible"}
    # ... while the engine itself was started with the real values.
    assert engine.last_handle.engine_info["engine_config"]["env"] == {**SECRETS,
                                                                      "PLAIN": "visible"}


def test_the_run_directory_is_private(original: tuple[Path, Any]) -> None:
    run_dir, _ = original
    directories = [run_dir, *(p for p in run_dir.rglob("*") if p.is_dir())]
    assert {d.name for d in directories} >= {"logs", "measurements"}
    for directory in directories:
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for path in every_file(run_dir):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_an_engine_log_is_private_and_masks_a_declared_secret(tmp_path: Path) -> None:
    """What a real engine prints goes to ``logs/`` through the launcher: ``0600``, and a secret
    the config declares (``secret_env``), not only one named like a secret, is masked."""
    import socket
    import sys

    from tunegate.servers.adapters.base import ServerConfig, secret_values
    from tunegate.servers.launch import LaunchSpec, launch

    config = ServerConfig("m", env=SECRETS, secret_env=frozenset({"MY_VAR"}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = LaunchSpec((sys.executable, "-c", "import os; print(os.environ['MY_VAR'], "
                       "os.environ['HF_TOKEN'])"), env=SECRETS, port=port,
                      secrets=secret_values(config, SECRETS))
    process = launch(spec, tmp_path / "logs", name="engine")
    assert process.popen.wait(timeout=30) == 0
    deadline = time.monotonic() + 10  # the pump thread writes the output after the exit
    while "***" not in (text := process.log_path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "*** ***" in text and MY_VAR not in text and HF_TOKEN not in text
    assert stat.S_IMODE(process.log_path.stat().st_mode) == 0o600


def test_a_config_read_back_from_the_journal_takes_secrets_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal holds the config masked; ``--resume`` and ``rollback`` rebuild it from
    there, so the engine's secrets come from the caller's environment, or the run stops."""
    from tunegate.cli.tune import config_from_journal
    from tunegate.errors import ConfigError
    from tunegate.tuner.config import TuneConfig
    from tunegate.tuner.driver import Tuner

    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    config = TuneConfig.model_validate({**_toml(), "run": {"budget": 1, "seed": 3},
                                        "report": {"plots": False}})
    Tuner(config, tmp_path / "run").run()
    recorded = config_from_journal(tmp_path / "run")
    assert recorded.server.env["HF_TOKEN"] == "***"
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="export HF_TOKEN="):
        Tuner(recorded, tmp_path / "run")
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("MY_VAR", MY_VAR)
    resumed = Tuner(recorded, tmp_path / "run")
    assert resumed.ctx.server_config({}).env == {**SECRETS, "PLAIN": "visible"}


def _toml() -> dict[str, Any]:
    import tomllib

    return tomllib.loads(CONFIG)


# ---- tampering -----------------------------------------------------------------------------
def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _write(path: Path, records: list[dict[str, Any]], *, rechain: bool = False) -> None:
    """Write records back as a forger would: each line's checksum recomputed (and, with
    ``rechain``, every chain link after the first change recomputed too)."""
    from tunegate.tuner.journal import encode_record

    out, prev = [], None
    for r in records:
        if rechain and prev is not None:
            r["prev"] = prev
        link = {"prev": r["prev"]} if "prev" in r else {}  # unchained: as tunegate wrote before
        out.append(encode_record(r["seq"], r["epoch"], r["type"], r["data"], **link))
        fields = ("seq", "epoch", "type", "data", "prev") if "prev" in r else (
            "seq", "epoch", "type", "data")
        prev = digest({k: r[k] for k in fields})  # the chain hash: SHA-256 of canonical JSON
    path.write_bytes(b"".join(out))


def _trial(run_dir: Path, verdict: str) -> dict[str, Any]:
    history = json.loads((run_dir / "summary.json").read_text())["history"]
    return next(t for t in history if t["verdict"] == verdict)


def kept_to_a_rejected_trial(run_dir: Path) -> str:
    kept = json.loads((run_dir / "kept.json").read_text())
    rejected = _trial(run_dir, "REJECT")
    kept.update(trial=rejected["trial"], params=rejected["params"])
    (run_dir / "kept.json").write_text(json.dumps(kept, indent=2) + "\n")
    return "kept.json"


def kept_out_of_bounds(run_dir: Path) -> str:
    kept = json.loads((run_dir / "kept.json").read_text())
    kept["params"]["max_num_seqs"] = 100_000  # the space is [1, 64]
    (run_dir / "kept.json").write_text(json.dumps(kept, indent=2) + "\n")
    return "kept.json"


def _forge_gate(run_dir: Path, *, rechain: bool) -> str:
    """The rejecting gate decision made to accept: inputs (the measured arms) and outputs taken
    from an accepting one, both hashes recomputed, so re-deriving it agrees with the forgery."""
    path = run_dir / "decisions.jsonl"
    records = _lines(path)
    gates = [r["data"] for r in records if r["data"]["component"] == "gate"]
    accepted = next(d for d in gates if d["outputs"]["decision"] == "ACCEPT")
    rejected = next(d for d in gates if d["outputs"]["decision"] == "REJECT")
    rejected["inputs"], rejected["outputs"] = accepted["inputs"], accepted["outputs"]
    rejected["input_hash"], rejected["output_hash"] = (digest(accepted["inputs"]),
                                                       digest(accepted["outputs"]))
    _write(path, records, rechain=rechain)
    return "decisions.jsonl"


def gate_forged_with_recomputed_hashes(run_dir: Path) -> str:
    return _forge_gate(run_dir, rechain=False)


def gate_forged_and_the_chain_after_it_recomputed(run_dir: Path) -> str:
    return _forge_gate(run_dir, rechain=True)


def middle_decision_deleted_and_renumbered(run_dir: Path) -> str:
    path = run_dir / "decisions.jsonl"
    records = _lines(path)
    del records[len(records) // 2]
    for seq, r in enumerate(records, start=1):
        r["seq"] = seq
    _write(path, records)
    return "decisions.jsonl"


def _a_measurement(run_dir: Path) -> Path:
    return sorted((run_dir / "measurements").iterdir())[3]


def measurement_edited(run_dir: Path) -> str:
    path = _a_measurement(run_dir)
    document = json.loads(path.read_text())
    document["records"][0]["t_end_ns"] += 1  # one nanosecond
    path.write_text(json.dumps(document))
    return f"measurements/{path.name}"


def measurement_deleted(run_dir: Path) -> str:
    path = _a_measurement(run_dir)
    path.unlink()
    return f"measurements/{path.name}"


def journal_emptied(run_dir: Path) -> str:
    (run_dir / "journal.jsonl").write_bytes(b"")
    return "journal.jsonl"


def kept_deleted(run_dir: Path) -> str:
    (run_dir / "kept.json").unlink()
    return "kept.json"


TAMPERING = [kept_to_a_rejected_trial, kept_out_of_bounds, gate_forged_with_recomputed_hashes,
             gate_forged_and_the_chain_after_it_recomputed,
             middle_decision_deleted_and_renumbered, measurement_edited, measurement_deleted,
             journal_emptied, kept_deleted]


def test_replay_passes_on_the_untouched_run(cli: Run, run_dir: Path) -> None:
    code, out, err = cli("replay", str(run_dir))
    assert code == 0, out + err
    assert "0 mismatches" in out and "chain:" in out


@pytest.mark.parametrize("tamper", TAMPERING, ids=[t.__name__ for t in TAMPERING])
def test_replay_detects_tampering_and_names_the_file(
        cli: Run, run_dir: Path, tamper: Callable[[Path], str]) -> None:
    named = tamper(run_dir)
    code, out, err = cli("replay", str(run_dir))
    assert code == 1, out + err
    problems = [line for line in out.splitlines() if line.startswith("mismatch")]
    assert any(f"{run_dir / named}" in line for line in problems), out
    assert "Traceback" not in err


@pytest.mark.parametrize("tamper", [kept_to_a_rejected_trial, kept_out_of_bounds, kept_deleted,
                                    journal_emptied],
                         ids=["kept-rejected-trial", "kept-out-of-bounds", "kept-deleted",
                              "journal-emptied"])
def test_rollback_refuses_a_kept_config_the_chain_does_not_vouch_for(
        cli: Run, run_dir: Path, tamper: Callable[[Path], str]) -> None:
    log = run_dir / "logs" / "simulator-virtual.log"
    starts = log.read_bytes().count(b'"event": "start"')
    tamper(run_dir)
    code, out, err = cli("rollback", str(run_dir))
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "refusing a kept config the run's chain does not vouch" in lines[0]
    assert str(run_dir) in lines[0]
    assert log.read_bytes().count(b'"event": "start"') == starts, "something was started"


def test_rollback_starts_the_vouched_kept_config(
        cli: Run, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    code, out, err = cli("rollback", str(run_dir))
    assert code == 0, out + err
    kept = json.loads((run_dir / "kept.json").read_text())
    assert f"rollback target: trial {kept['trial']}" in out
    assert not any(s.encode() in (run_dir / "logs/simulator-virtual.log").read_bytes()
                   for s in SECRETS.values())


def test_rollback_of_a_masked_secret_without_it_in_the_environment(
        cli: Run, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("MY_VAR", MY_VAR)
    code, _, err = cli("rollback", str(run_dir))
    assert code == 2 and "export HF_TOKEN=" in err and len(err.strip().splitlines()) == 1


def test_a_run_directory_written_before_chaining_still_replays(cli: Run, run_dir: Path) -> None:
    """What tunegate wrote before: unchained lines, no head files, no chain in the summary."""
    for name in ("journal.jsonl", "decisions.jsonl"):
        records = _lines(run_dir / name)
        for r in records:
            del r["prev"]
        _write(run_dir / name, records)
        (run_dir / name).with_suffix(".head").unlink()
    summary = json.loads((run_dir / "summary.json").read_text())
    del summary["chain"]
    (run_dir / "summary.json").write_text(json.dumps(summary))
    code, out, err = cli("replay", str(run_dir))
    assert code == 0, out + err
    assert "no chain (written before" in out and "0 mismatches" in out
    code, out, err = cli("rollback", "--dry-run", str(run_dir))
    assert code == 0 and "no chain (written before" in out, out + err
