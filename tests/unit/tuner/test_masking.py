"""Secrets in ``[server] env``: masked wherever a run records the config, real for the engine.

A value is a secret when its name says so (``HF_TOKEN``, ``*_API_KEY``, ``*_SECRET``...) or
``[server] secret_env`` lists its name. The journal and every proposal decision hold the masked
config (and decide on it, so replay agrees); a config read back from a journal gets the real
values from the environment, or stops in one line naming the variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError
from tunegate.servers.adapters.base import ServerConfig, secret_values
from tunegate.tuner import deciders
from tunegate.tuner.config import TuneConfig, load_config
from tunegate.tuner.digest import digest
from tunegate.tuner.masking import MASK, engine_env, recorded_config, scrub
from tunegate.tuner.masking import secret_values as config_secrets

ENV = {"HF_TOKEN": "hf_abcdef123456", "OPENAI_API_KEY": "sk-live-0987",
       "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI", "DB_PASSWORD": "hunter22",
       "MY_VAR": "declared-value", "NCCL_DEBUG": "INFO"}


def _config(**server: Any) -> TuneConfig:
    return TuneConfig.model_validate({
        "server": {"env": ENV, "secret_env": ["MY_VAR"], **server},
        "workload": {"dataset": "synthetic", "num_requests": 8, "input_tokens": "16",
                     "output_tokens": "4", "concurrency": 2},
        "space": [{"name": "max_num_seqs", "kind": "int", "layer": "memory_concurrency",
                   "low": 1, "high": 8, "default": 2}],
    })


def test_the_recorded_config_masks_secrets_by_name_and_by_the_declared_list() -> None:
    recorded = recorded_config(_config())
    assert recorded["server"]["env"] == {**dict.fromkeys(
        ["HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "MY_VAR"], MASK),
        "NCCL_DEBUG": "INFO"}
    assert recorded["server"]["secret_env"] == ["MY_VAR"]
    again = TuneConfig.model_validate(recorded)  # what --resume reads back
    assert recorded_config(again) == recorded


def test_a_proposal_decided_on_the_masked_config_is_the_one_the_real_config_gives() -> None:
    """Why replay may hash the masked form: no decider reads an environment value."""
    config = _config()
    inputs = {"history": [{"op": "register", "config": {"max_num_seqs": 2},
                           "reason": "baseline"}], "budget": 4}
    real = deciders.propose({**inputs, "config": config.to_json()}, 0)
    masked = deciders.propose({**inputs, "config": recorded_config(config)}, 0)
    assert digest(real) == digest(masked)


def test_the_engine_gets_masked_secrets_from_the_environment() -> None:
    recorded = TuneConfig.model_validate(recorded_config(_config()))
    environ = {**ENV, "UNRELATED": "x"}
    assert engine_env(recorded.server, environ) == ENV
    assert engine_env(_config().server, {}) == ENV  # a fresh run: the file's own values
    with pytest.raises(ConfigError, match=r"\[server\] env HF_TOKEN: .* export HF_TOKEN="):
        engine_env(recorded.server, {k: v for k, v in ENV.items() if k != "HF_TOKEN"})
    assert sorted(config_secrets(recorded, environ)) == sorted(
        v for k, v in ENV.items() if k != "NCCL_DEBUG")


def test_scrub_masks_secret_values_anywhere_in_a_document() -> None:
    document = {"story": ["start failed: bad token hf_abcdef123456"],
                "hf_abcdef123456": {"n": 3, "x": ("ok", "sk-live-0987!")}}
    assert scrub(document, ["hf_abcdef123456", "sk-live-0987"]) == {
        "story": ["start failed: bad token ***"], "***": {"n": 3, "x": ["ok", "***!"]}}


def test_a_declared_name_is_masked_in_the_server_configs_record_and_logs() -> None:
    config = ServerConfig("m", env={"MY_VAR": "declared-value", "PLAIN": "shown"},
                          secret_env=frozenset({"MY_VAR"}))
    assert config.to_dict()["env"] == {"MY_VAR": MASK, "PLAIN": "shown"}
    assert secret_values(config, config.env) == frozenset({"declared-value"})
    undeclared = ServerConfig("m", env={"MY_VAR": "declared-value"})
    assert undeclared.to_dict()["env"] == {"MY_VAR": "declared-value"}


@pytest.mark.parametrize(("secret_env", "message"), [
    ('["NOT_SET"]', "server.secret_env: 'NOT_SET' is not set in [server] env"),
    ('["1BAD"]', "server.secret_env: '1BAD' is not an environment variable name"),
], ids=["not-in-env", "not-a-name"])
def test_secret_env_names_variables_of_env(tmp_path: Path, secret_env: str,
                                           message: str) -> None:
    path = tmp_path / "tune.toml"
    path.write_text('[server]\nenv = { TOKEN_X = "s3cr3t-value" }\n'
                    f"secret_env = {secret_env}\n\n"
                    '[workload]\ndataset = "synthetic"\nnum_requests = 8\n'
                    'input_tokens = "16"\noutput_tokens = "4"\nconcurrency = 2\n',
                    encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert message in str(caught.value) and "s3cr3t-value" not in str(caught.value)
