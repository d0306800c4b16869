"""The README's example configs load, and render to each engine's real command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.tuner.config import load_config
from tunegate.tuner.driver import Tuner

EXAMPLES = Path(__file__).parents[3] / "examples"


def _argv(name: str, tmp_path: Path) -> tuple[str, ...]:
    tuner = Tuner(load_config(EXAMPLES / name), tmp_path)
    baseline = tuner._engine(tuner.space.default() | dict(tuner.config.baseline))
    return tuple(tuner.adapter.render(tuner._server_config(baseline)).argv)


def test_vllm_example_renders_vllm_serve_flags(tmp_path: Path) -> None:
    argv = _argv("tune-vllm.toml", tmp_path)
    assert argv[:3] == ("vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")
    assert "--max-num-seqs" in argv and "--enable-chunked-prefill" in argv
    assert "NCCL_PROTO" not in " ".join(argv)  # environment layer goes to the environment


def test_sglang_example_renders_launch_server_flags(tmp_path: Path) -> None:
    argv = _argv("tune-sglang.toml", tmp_path)
    assert argv[1:3] == ("-m", "sglang.launch_server")
    assert "--max-running-requests" in argv and "--mem-fraction-static" in argv


def test_command_example_uses_its_aliases(tmp_path: Path) -> None:
    argv = _argv("tune-command.toml", tmp_path)
    assert argv[0] == "llama-server"
    assert argv[argv.index("-np") + 1] == "1" and argv[argv.index("-t") + 1] == "2"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.toml")))
def test_every_example_validates(name: str) -> None:
    config = load_config(EXAMPLES / name)
    assert config.search_space().dims >= 1
