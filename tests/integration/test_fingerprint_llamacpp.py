"""The fingerprint of the real llama.cpp ``llama-server`` with the generated tiny model: its
version from ``/props`` agrees with ``--version``, its model digest is the GGUF file's.

Needs the binary from ``make llama-server``; skipped with the reason when it is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tunegate.fingerprint import Target, take_fingerprint
from tunegate.fingerprint.engines import read_engine
from tunegate.fingerprint.gguf import gguf_digest
from tunegate.testing.gguf_models import TINY, ensure_model
from tunegate.testing.llamacpp import BUILD_HINT, find_llama_server, running_llama_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def llama_server() -> Path:
    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"llama-server is not built; {BUILD_HINT}")
    return binary


@pytest.fixture(scope="module")
def tiny(llama_server: Path) -> Iterator[tuple[str, Path]]:
    model = ensure_model(TINY)
    with running_llama_server(model, parallel=1, threads=1, ctx=512,
                              binary=llama_server) as url:
        yield url, model


def test_llama_server_fingerprint_has_build_info_and_the_gguf_digest(
        tiny: tuple[str, Path], llama_server: Path) -> None:
    url, model = tiny
    fp = take_fingerprint(Target("llamacpp", base_url=url, binary=str(llama_server)))
    version = fp.fields["engine.version"]
    assert version.source == "measured" and version.how == "GET /props build_info"
    assert isinstance(version.value, str) and version.value.startswith("b")
    digest = fp.fields["model.digest"]
    assert (digest.value, digest.source) == (gguf_digest(model).digest, "measured")
    assert digest.how.endswith("(GET /props model_path)")
    assert fp.fields["model.name"].value == str(model)  # llama-server serves the path


def test_the_binarys_version_agrees_with_props(tiny: tuple[str, Path],
                                               llama_server: Path) -> None:
    url, _ = tiny
    served = take_fingerprint(Target("url", base_url=url)).fields
    assert served["engine.name"].value == "llama.cpp"
    from_binary = read_engine("llamacpp", {}, binary=str(llama_server)).version
    assert from_binary.how.endswith("--version`")
    assert from_binary.value == served["engine.version"].value
