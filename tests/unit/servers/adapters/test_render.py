"""Each adapter renders a server config to an exact argv (engine flag spellings)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
import yaml

from tunegate.errors import ConfigError
from tunegate.servers.adapters import (
    ADAPTERS,
    CommandAdapter,
    LlamaCppAdapter,
    LlamaCppPythonAdapter,
    ServerConfig,
    SGLangAdapter,
    SimulatorAdapter,
    VllmAdapter,
    create_adapter,
)
from tunegate.servers.adapters.flags import FlagRules, split_params
from tunegate.servers.simulator.faults import FaultConfig

PY = sys.executable


def test_vllm_argv_and_env_layer() -> None:
    config = ServerConfig(
        "meta-llama/Llama-3.1-8B-Instruct",
        {"max_num_seqs": 64, "--enable-chunked-prefill": False, "gpu-memory-utilization": 0.9,
         "max_num_batched_tokens": None, "enable_prefix_caching": True,
         "NCCL_ALGO": "Tree"},
        port=8000,
        env={"HF_HOME": "/cache"},
    )
    spec = VllmAdapter().render(config)
    assert list(spec.argv) == [
        "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host", "127.0.0.1",
        "--port", "8000", "--max-num-seqs", "64", "--no-enable-chunked-prefill",
        "--gpu-memory-utilization", "0.9", "--enable-prefix-caching",
    ]
    assert dict(spec.env) == {"HF_HOME": "/cache", "NCCL_ALGO": "Tree"}
    assert spec.health_path == "/health"
    assert VllmAdapter.expected_metric_prefix == "vllm:"


def test_vllm_api_key_goes_to_the_environment_and_is_a_secret() -> None:
    config = ServerConfig("m", port=8001, api_key="sk-very-secret",
                          served_model_name="served", env={"HF_TOKEN": "hf_abcdef"})
    spec = VllmAdapter(executable=["/opt/vllm/bin/vllm"]).render(config)
    assert list(spec.argv) == ["/opt/vllm/bin/vllm", "serve", "m", "--host", "127.0.0.1",
                               "--port", "8001", "--served-model-name", "served"]
    assert spec.env["VLLM_API_KEY"] == "sk-very-secret"
    assert spec.secrets == frozenset({"sk-very-secret", "hf_abcdef"})
    assert "sk-very-secret" not in repr(spec) and "sk-very-secret" not in repr(config)
    assert config.to_dict()["api_key"] == "***" and config.to_dict()["env"]["HF_TOKEN"] == "***"


def test_vllm_plain_switch_set_false_is_omitted_not_negated() -> None:
    # --disable-log-stats is a store_true switch in vLLM 0.33: --no-disable-log-stats is rejected.
    off = VllmAdapter().render(ServerConfig("m", {"disable_log_stats": False,
                                                  "async_scheduling": False}))
    assert list(off.argv)[7:] == ["--no-async-scheduling"]
    on = VllmAdapter().render(ServerConfig("m", {"disable_log_stats": True}))
    assert list(on.argv)[7:] == ["--disable-log-stats"]


def test_vllm_refuses_unknown_flags_bools_for_values_and_bad_choices() -> None:
    with pytest.raises(ConfigError, match=r"--max-num-seq .*not a flag of vllm 0\.33\.0.*did "
                                          r"you mean --max-num-seqs"):
        VllmAdapter().render(ServerConfig("m", {"max_num_seq": 8}))
    with pytest.raises(ConfigError, match=r"--max-num-seqs takes a value \(value\), not True"):
        VllmAdapter().render(ServerConfig("m", {"max_num_seqs": True}))
    with pytest.raises(ConfigError, match=r"--scheduling-policy='lifo' is not accepted.*fcfs, "
                                          "priority"):
        VllmAdapter().render(ServerConfig("m", {"scheduling_policy": "lifo"}))
    with pytest.raises(ConfigError, match="--enforce-eager is a switch; give enforce_eager as "
                                          "true or false"):
        VllmAdapter().render(ServerConfig("m", {"enforce_eager": "yes"}))


def test_engine_version_and_flag_file_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no flag list for version '0\.1\.0' \(shipped: "
                                          r"0\.33\.0\).*check_engine_flags\.py vllm 0\.1\.0"):
        VllmAdapter(engine_version="0.1.0")
    own = tmp_path / "vllm-9.0.0.json"
    own.write_text(json.dumps({"engine": "vllm", "version": "9.0.0", "flags": [
        {"flag": "--enable-turbo", "kind": "boolean_optional", "dest": "enable_turbo",
         "negatives": ["--disable-turbo", "--no-enable-turbo"]}]}))
    adapter = create_adapter("vllm", engine_flags=str(own))
    # argparse's own negative, which releases before the --disable-x pairing accept too ...
    assert list(adapter.render(ServerConfig("m", {"enable_turbo": False})).argv)[7:] == [
        "--no-enable-turbo"]
    # ... and the documented one only for a list that no longer records it.
    only = tmp_path / "vllm-9.1.0.json"
    only.write_text(json.dumps({"engine": "vllm", "version": "9.1.0", "flags": [
        {"flag": "--enable-turbo", "kind": "boolean_optional", "dest": "enable_turbo",
         "negatives": ["--disable-turbo"]}]}))
    newer = create_adapter("vllm", engine_flags=str(only))
    assert list(newer.render(ServerConfig("m", {"enable_turbo": False})).argv)[7:] == [
        "--disable-turbo"]
    with pytest.raises(ConfigError, match="lists vllm's flags, not sglang's"):
        SGLangAdapter(engine_flags=own)
    with pytest.raises(ConfigError, match="need an engine with a flag list"):
        LlamaCppAdapter(engine_version="b5000")


def test_sglang_argv_store_true_booleans_and_no_api_key_on_the_command_line() -> None:
    config = ServerConfig(
        "Qwen/Qwen2.5-7B-Instruct",
        {"max_running_requests": 128, "chunked_prefill_size": 4096, "mem_fraction_static": 0.85,
         "disable_radix_cache": True, "enable_torch_compile": False, "tp_size": 2},
        port=30000, api_key="sg-key-123",
    )
    spec = SGLangAdapter().render(config)
    assert list(spec.argv) == [
        PY, "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B-Instruct",
        "--host", "127.0.0.1", "--port", "30000", "--enable-metrics",
        "--max-running-requests", "128", "--chunked-prefill-size", "4096",
        "--mem-fraction-static", "0.85", "--disable-radix-cache", "--tp-size", "2",
    ]
    assert "sg-key-123" in spec.secrets  # masked in the log if the engine prints it
    assert SGLangAdapter.expected_metric_prefix == "sglang:"


def test_sglang_api_key_travels_in_a_private_config_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # no runtime dir: the log directory
    adapter = SGLangAdapter()
    config = ServerConfig("m", {"max_running_requests": 8}, port=30001, api_key='k"ey:1 #x')
    spec, cleanup = adapter.prepare(config, tmp_path / "logs")
    assert list(spec.argv[:-2]) == list(adapter.render(config).argv)
    assert spec.argv[-2] == "--config" and all('k"ey' not in a for a in spec.argv)
    path = Path(spec.argv[-1])
    assert path.parent == tmp_path / "logs" and path.suffix == ".yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text()) == {"api-key": 'k"ey:1 #x'}
    cleanup()
    assert not path.exists()
    without, _ = adapter.prepare(ServerConfig("m", port=30001), tmp_path)
    assert "--config" not in without.argv
    with pytest.raises(ConfigError, match="SGLang reads one --config file"):
        adapter.prepare(ServerConfig("m", {"config": "/etc/s.yaml"}, api_key="k"), tmp_path)


def test_sglang_key_file_prefers_the_private_runtime_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # $XDG_RUNTIME_DIR is the user's own tmpfs (0700): the key stays off the disk.
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    adapter = SGLangAdapter()
    spec, cleanup = adapter.prepare(ServerConfig("m", port=30002, api_key="k-1"),
                                    tmp_path / "logs")
    path = Path(spec.argv[-1])
    assert path.parent == runtime and path.name.endswith(".secret.yaml")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not (tmp_path / "logs").exists()
    cleanup()
    assert not path.exists()
    # A runtime dir that is set but missing (a stale variable): the log directory.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "gone"))
    spec, cleanup = adapter.prepare(ServerConfig("m", port=30002, api_key="k-1"),
                                    tmp_path / "logs")
    assert Path(spec.argv[-1]).parent == tmp_path / "logs"
    cleanup()


def test_sglang_refuses_a_false_that_the_command_line_cannot_say() -> None:
    # --enable-multimodal is a switch whose default is None: left out, the engine decides.
    with pytest.raises(ConfigError, match=r"enable_multimodal=False cannot be said.*--enable-"
                                          r"multimodal is a switch without a negative form.*"
                                          "the engine decides"):
        SGLangAdapter().render(ServerConfig("m", {"enable_multimodal": False}))
    spec = SGLangAdapter().render(ServerConfig("m", {"enable_mixed_chunk": False,
                                                     "enable_multimodal": True}))
    assert list(spec.argv)[10:] == ["--enable-multimodal"]


def test_sglang_expects_its_own_names_back_after_start() -> None:
    config = ServerConfig("m", {"tensor_parallel_size": 2, "enable_mixed_chunk": False,
                                "chunked_prefill_size": None, "NCCL_ALGO": "Tree"})
    check = SGLangAdapter().engine_args_check(config)
    assert check is not None
    assert dict(check.expected) == {"tp_size": 2, "enable_mixed_chunk": False}
    assert check.paths == ("/server_info", "/get_server_info")
    assert VllmAdapter().engine_args_check(config) is None  # vLLM reports no arguments
    assert SGLangAdapter().engine_args_check(ServerConfig("m")) is None


def test_llama_server_short_flags_and_metrics() -> None:
    config = ServerConfig("/models/q.gguf", {"parallel": 4, "ctx_size": 8192, "threads": 8,
                                             "cont_batching": False, "n_gpu_layers": 0},
                          port=8080, served_model_name="qwen")
    spec = LlamaCppAdapter().render(config)
    assert list(spec.argv) == [
        "llama-server", "-m", "/models/q.gguf", "--host", "127.0.0.1", "--port", "8080",
        "--metrics", "--alias", "qwen", "-np", "4", "-c", "8192", "-t", "8",
        "--no-cont-batching", "-ngl", "0",
    ]
    assert LlamaCppAdapter.expected_metric_prefix == "llamacpp:"
    assert LlamaCppAdapter().uses_accelerator is False


def test_llama_cpp_python_quirks() -> None:
    adapter = LlamaCppPythonAdapter()
    spec = adapter.render(ServerConfig("/m.gguf", {"n_ctx": 4096, "n_threads": 8,
                                                   "logits_all": False}, port=8081))
    assert list(spec.argv) == [
        PY, "-m", "llama_cpp.server", "--model", "/m.gguf", "--host", "127.0.0.1",
        "--port", "8081", "--interrupt_requests", "False", "--n_ctx", "4096",
        "--n_threads", "8", "--logits_all", "False",
    ]
    assert spec.health_path == "/v1/models"
    assert adapter.expected_metric_prefix is None


def test_command_template_and_rules() -> None:
    adapter = CommandAdapter(["my-server", "--listen", "{host}:{port}", "--weights", "{model}",
                              '--json={"a": 1}'], bool_style="value", name_style="snake")
    spec = adapter.render(ServerConfig("/m/w.bin", {"batch_size": 8, "use_cache": False,
                                                    "layers": [1, 2]}, port=9000))
    assert list(spec.argv) == [
        "my-server", "--listen", "127.0.0.1:9000", "--weights", "/m/w.bin", '--json={"a": 1}',
        "--batch_size", "8", "--use_cache", "false", "--layers", "1", "2",
    ]
    omit = CommandAdapter(["s", "{port}"], bool_style="omit", flag_prefix="-",
                          aliases={"threads": "-t"})
    assert list(omit.render(ServerConfig("m", {"fast": True, "slow": False, "threads": 2},
                                         port=7000)).argv) == ["s", "7000", "-fast", "-t", "2"]


def test_command_rejects_shell_strings_and_unknown_placeholders() -> None:
    with pytest.raises(ConfigError, match="not a shell string"):
        CommandAdapter("my-server --port {port}")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"unknown placeholder \{gpu\}"):
        CommandAdapter(["s", "--gpu", "{gpu}"])
    with pytest.raises(ConfigError, match="bool_style"):
        CommandAdapter(["s"], bool_style="maybe")  # type: ignore[arg-type]


def test_simulator_argv_env_as_flags_and_faults() -> None:
    adapter = SimulatorAdapter("fast", faults=FaultConfig(slow_start_s=2.0,
                                                          crash_after_requests=5))
    config = adapter.default_config({"max_num_seqs": 64, "enable_chunked_prefill": False,
                                     "NCCL_ALGO": "Tree"}, port=8123)
    assert config.model == "llama-3.1-8b"
    assert list(adapter.render(config).argv) == [
        PY, "-m", "tunegate", "sim", "serve", "--scenario", "fast", "--host", "127.0.0.1",
        "--port", "8123", "--seed", "0", "--fault-slow-start-s", "2.0", "--fault-crash-after",
        "5", "--max-num-seqs", "64", "--no-enable-chunked-prefill", "--env", "NCCL_ALGO=Tree",
    ]


@pytest.mark.parametrize("name", ["model", "--port", "host"])
def test_reserved_names_are_not_parameters(name: str) -> None:
    with pytest.raises(ConfigError, match=f"vllm: '{name.lstrip('-')}' is part of the server"):
        VllmAdapter().render(ServerConfig("m", {name: "x"}))


def test_invalid_values_name_adapter_and_flag() -> None:
    with pytest.raises(ConfigError, match=r"sglang: --chunked-prefill-size=\{"):
        SGLangAdapter().render(ServerConfig("m", {"chunked_prefill_size": {"a": 1}}))
    with pytest.raises(ConfigError, match="finite"):
        VllmAdapter().render(ServerConfig("m", {"gpu_memory_utilization": float("inf")}))
    with pytest.raises(ConfigError, match="given twice"):
        split_params({"max_num_seqs": 1, "--max-num-seqs": 2}, adapter="vllm")
    with pytest.raises(ConfigError, match="parameter name"):
        split_params({"max num seqs": 1}, adapter="vllm")
    with pytest.raises(ConfigError, match="port"):
        ServerConfig("m", port=0)


def test_flag_rules_env_values_and_none() -> None:
    flags, env = split_params({"A_B": True, "x": None, "TASK_QUEUE_ENABLE": 2}, adapter="a")
    assert env == {"A_B": "1", "TASK_QUEUE_ENABLE": "2"}
    assert FlagRules().render(flags) == []


def test_registry_and_factory() -> None:
    assert set(ADAPTERS) == {"vllm", "sglang", "llamacpp", "llamacpp-python", "command",
                             "simulator", "simulator-virtual"}
    assert isinstance(create_adapter("vllm", startup_budget_s=5), VllmAdapter)
    with pytest.raises(ConfigError, match="valid adapters: vllm"):
        create_adapter("tgi")
    with pytest.raises(ConfigError, match="invalid options"):
        create_adapter("vllm", nonsense=1)


def test_wildcard_host_is_reached_on_loopback() -> None:
    spec = VllmAdapter().render(ServerConfig("m", host="0.0.0.0", port=8000))
    assert spec.base_url == "http://127.0.0.1:8000"


def test_server_config_round_trips_without_its_secret() -> None:
    config = ServerConfig("m", {"max_num_seqs": 8}, port=8100, env={"A": "b"},
                          served_model_name="s", api_key="sk-123456")
    data = config.to_dict()
    assert "sk-123456" not in str(data)
    assert ServerConfig.from_dict(data, api_key="sk-123456") == config
    assert config.with_params({"block_size": 32}).params == {"max_num_seqs": 8, "block_size": 32}
    with pytest.raises(ConfigError, match="malformed"):
        ServerConfig.from_dict({"params": {}})
