"""vLLM: ``vllm serve MODEL --host H --port P`` plus engine flags in vLLM's CLI spelling.

Flags are kebab case and checked against the flag list read from vLLM's own parser
(``engine_flags/vllm-<version>.json``, newest shipped by default; adapter option
``engine_version`` or ``engine_flags`` for another). Booleans follow each flag's kind there:

* most booleans are argparse ``BooleanOptionalAction`` (derived from config dataclass fields):
  true is ``--enable-chunked-prefill``, false is argparse's own negative,
  ``--no-enable-chunked-prefill`` / ``--no-enable-prefix-caching``. vLLM 0.33 documents
  ``--disable-chunked-prefill`` instead (its parser pairs ``--enable-x`` with ``--disable-x``
  and keeps ``--no-enable-x``, hidden from help), but the releases before that pairing
  (0.9 and 0.11 among them: ``get_kwargs`` maps a ``bool`` field to a plain
  ``BooleanOptionalAction``) know only ``--no-enable-x`` and refuse ``--disable-x``, and the
  default list is the newest shipped one. The ``--no-`` form is accepted by both, so it is
  rendered whenever the flag list records it. Detecting the installed version
  (``vllm --version`` before launch) was rejected as less robust: it imports vLLM (seconds,
  plugins, CUDA) or runs whatever wrapper the executable is (``docker run ...``), and a
  version without a shipped list would still need this fallback. (vLLM releases older still,
  whose ``--enable-chunked-prefill`` took a value, need their own list: ``engine_flags``);
* a few are plain ``store_true`` switches (``--disable-log-stats``, ``--headless``): true is
  the flag, false is the flag left out, since ``--no-disable-log-stats`` does not exist.

An unknown flag, or a value outside the parser's choices, is refused before anything starts.
With chunked prefill off vLLM refuses to start when ``max_num_batched_tokens < max_model_len``
(``examples/tune-vllm.toml`` repairs that with a constraint). Upper-case parameters
(``VLLM_ATTENTION_BACKEND``, ``NCCL_ALGO``) go to the environment. The API key goes to
``VLLM_API_KEY``, never to the command line. Endpoints: ``/health`` (200 once the engine is
up), ``/v1/models``, ``/metrics`` (``vllm:`` prefix).

Example::

    ServerConfig("meta-llama/Llama-3.1-8B-Instruct", {"max_num_seqs": 64,
                 "enable_chunked_prefill": False, "disable_log_stats": False}, port=8000)
    -> vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --port 8000
       --max-num-seqs 64 --no-enable-chunked-prefill
"""

from __future__ import annotations

from tunegate.servers.adapters.base import BaseAdapter, ServerConfig
from tunegate.servers.adapters.flags import FlagRules

__all__ = ["VllmAdapter"]


class VllmAdapter(BaseAdapter):
    """``vllm serve`` (see the module docstring)."""

    name = "vllm"
    expected_metric_prefix = "vllm:"
    rules = FlagRules(bool_style="negate")
    flags_engine = "vllm"
    api_key_env = "VLLM_API_KEY"
    default_executable = ("vllm",)

    def base_argv(self, config: ServerConfig) -> list[str]:
        """``vllm serve MODEL --host H --port P [--served-model-name NAME]``."""
        argv = [*self.executable, "serve", config.model, "--host", config.host,
                "--port", str(config.port)]
        if config.served_model_name:
            argv += ["--served-model-name", config.served_model_name]
        return argv
