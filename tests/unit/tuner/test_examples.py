"""The README's example configs load, and render to each engine's real command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunegate.servers.engine import ProcessEngine
from tunegate.tuner.config import load_config
from tunegate.tuner.driver import Tuner

EXAMPLES = Path(__file__).parents[3] / "examples"


def _render(tuner: Tuner, params: dict[str, Any]) -> tuple[str, ...]:
    """The command line the tuner's engine would run for ``params``."""
    engine = tuner.ctx.engine
    assert isinstance(engine, ProcessEngine)
    return tuple(engine.deployable.render(tuner.ctx.server_config(params)).argv)


def _argv(name: str, tmp_path: Path) -> tuple[str, ...]:
    tuner = Tuner(load_config(EXAMPLES / name), tmp_path)
    return _render(tuner, tuner.ctx.space.default() | dict(tuner.ctx.config.baseline))


def test_vllm_example_renders_vllm_serve_flags(tmp_path: Path) -> None:
    argv = _argv("tune-vllm.toml", tmp_path)
    assert argv[:3] == ("vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")
    assert "--max-num-seqs" in argv and "--enable-chunked-prefill" in argv
    assert "--kv-cache-dtype" in argv and argv[argv.index("--kv-cache-dtype") + 1] == "auto"
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


def _flag_value(argv: tuple[str, ...], flag: str) -> int:
    assert flag in argv, f"{flag} is not rendered: the engine would use its own default"
    return int(argv[argv.index(flag) + 1])


def test_vllm_example_never_asks_vllm_for_what_it_refuses(tmp_path: Path) -> None:
    """Chunked prefill off needs max_num_batched_tokens >= max_model_len (vLLM 0.33 refuses
    to start otherwise); the example's constraint repairs any proposal that breaks it."""
    tuner = Tuner(load_config(EXAMPLES / "tune-vllm.toml"), tmp_path)
    proposal = {**tuner.ctx.space.default(), "enable_chunked_prefill": False,
                "max_num_batched_tokens": 1024, "long_prefill_token_threshold": 4096}
    repaired = tuner.ctx.space.repair(proposal)
    assert repaired is not None
    argv = _render(tuner, repaired)
    assert "--no-enable-chunked-prefill" in argv
    assert _flag_value(argv, "--max-num-batched-tokens") >= _flag_value(argv, "--max-model-len")
    assert _flag_value(argv, "--max-num-batched-tokens") >= _flag_value(argv, "--max-num-seqs")


@pytest.mark.parametrize("name", ["tune-vllm.toml", "tune-sglang.toml"])
def test_every_engine_knob_has_a_light_and_a_reason(name: str) -> None:
    space = load_config(EXAMPLES / name).search_space()
    for param in space.params:
        assert len(param.reason) >= 30, f"{param.name} needs a reason a reader learns from"
    names = {p.name for p in space.params}
    wanted = {
        "tune-vllm.toml": {"long_prefill_token_threshold", "async_scheduling",
                           "performance_mode", "max_cudagraph_capture_size", "kv_cache_dtype",
                           "block_size", "scheduling_policy", "stream_interval"},
        "tune-sglang.toml": {"mem_fraction_static", "max_running_requests",
                             "chunked_prefill_size", "max_prefill_tokens", "schedule_policy",
                             "schedule_conservativeness", "enable_mixed_chunk",
                             "num_continuous_decode_steps", "cuda_graph_max_bs_decode"},
    }[name]
    assert wanted <= names


def test_capacity_example_tunes_for_capacity_on_the_simulator() -> None:
    config = load_config(EXAMPLES / "tune-capacity.toml")
    assert config.objective.metric == "capacity" and config.server.adapter == "simulator-virtual"
    assert config.capacity is not None
    plan = config.capacity.plan(seed=0)
    assert plan.by == "rate" and [s.name for s in plan.slos] == ["ttft_p99", "tpot_mean"]
