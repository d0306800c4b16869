"""A model directory's digest covers its config and weight index (or the weight files' names
and sizes), never the weights; what is not a model is an unknown digest saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunegate.fingerprint.model_digest import (
    ModelDirError,
    directory_digest,
    model_digest,
    simulated_model_digest,
)

CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
          "torch_dtype": "bfloat16", "vocab_size": 128256}
INDEX = {"metadata": {"total_size": 16060522496},
         "weight_map": {"lm_head.weight": "model-00004-of-00004.safetensors",
                        "model.embed_tokens.weight": "model-00001-of-00004.safetensors"}}


def _model(directory: Path, *, index: bool = True, **config: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({**CONFIG, **config}))
    (directory / "generation_config.json").write_text('{"bos_token_id": 128000}')
    if index:
        (directory / "model.safetensors.index.json").write_text(json.dumps(INDEX))
    for part in (1, 4):
        (directory / f"model-0000{part}-of-00004.safetensors").write_bytes(b"\x00" * 32)
    return directory


def test_a_model_directory_digest_names_what_it_covers(tmp_path: Path) -> None:
    digest, covered = directory_digest(_model(tmp_path / "m"))
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    assert covered == ["config.json", "generation_config.json", "model.safetensors.index.json"]
    field = model_digest(tmp_path / "m", whose="the configured model path")
    assert (field.value, field.source) == (digest, "measured")
    assert "config.json, generation_config.json, model.safetensors.index.json" in field.how


def test_weights_do_not_count_but_config_and_index_do(tmp_path: Path) -> None:
    base = directory_digest(_model(tmp_path / "a"))[0]
    rewritten = _model(tmp_path / "b")
    (rewritten / "model-00001-of-00004.safetensors").write_bytes(b"\xff" * 32)
    assert directory_digest(rewritten)[0] == base
    assert directory_digest(_model(tmp_path / "c", num_hidden_layers=16))[0] != base
    reindexed = _model(tmp_path / "d")
    (reindexed / "model.safetensors.index.json").write_text(json.dumps(
        {**INDEX, "metadata": {"total_size": 1}}))
    assert directory_digest(reindexed)[0] != base


def test_without_an_index_the_weight_files_names_and_sizes_count(tmp_path: Path) -> None:
    model = _model(tmp_path / "m", index=False)
    digest, covered = directory_digest(model)
    assert covered[-1] == "names and sizes of 2 weight file(s)"
    (model / "model-00001-of-00004.safetensors").write_bytes(b"\x00" * 33)
    assert directory_digest(model)[0] != digest


def test_a_directory_without_config_or_weights_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelDirError, match=r"has no config\.json"):
        directory_digest(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelDirError, match="no weight index and no weight files"):
        directory_digest(tmp_path)
    field = model_digest(tmp_path)
    assert field.source == "unknown" and "no weight index" in field.how


def test_a_path_that_is_not_here_is_unknown(tmp_path: Path) -> None:
    field = model_digest("meta-llama/Llama-3.1-8B-Instruct", whose="[server] model")
    assert (field.value, field.source) == (None, "unknown")
    assert field.how == ("meta-llama/Llama-3.1-8B-Instruct is not a file or directory on "
                         "this machine ([server] model)")


def test_a_simulated_model_digest_is_stable_and_per_model() -> None:
    a, again, other = (simulated_model_digest(m) for m in
                       ("llama-3.1-8b", "llama-3.1-8b", "llama-3.1-70b"))
    assert a == again and a.source == "configured"
    assert a.value != other.value
    assert simulated_model_digest("gpt-9").source == "unknown"


def test_a_path_no_file_can_have_is_unknown_not_a_crash() -> None:
    field = model_digest("/models/x\0.gguf", whose="GET /props model_path")
    assert field.source == "unknown" and "is not a file or directory" in field.how
