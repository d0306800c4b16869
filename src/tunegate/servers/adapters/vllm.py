"""vLLM: ``vllm serve MODEL --host H --port P`` plus engine flags in vLLM's CLI spelling.

Flags are kebab case; booleans use argparse's ``BooleanOptionalAction`` form that vLLM's engine
arguments accept (``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill``). Upper-case
parameters (``VLLM_ATTENTION_BACKEND``, ``NCCL_ALGO``) go to the environment. The API key goes
to ``VLLM_API_KEY``, never to the command line. Endpoints: ``/health`` (200 once the engine is
up), ``/v1/models``, ``/metrics`` (``vllm:`` prefix).

Example::

    ServerConfig("meta-llama/Llama-3.1-8B-Instruct", {"max_num_seqs": 64,
                 "enable_chunked_prefill": False}, port=8000)
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
    api_key_env = "VLLM_API_KEY"
    default_executable = ("vllm",)

    def base_argv(self, config: ServerConfig) -> list[str]:
        """``vllm serve MODEL --host H --port P [--served-model-name NAME]``."""
        argv = [*self.executable, "serve", config.model, "--host", config.host,
                "--port", str(config.port)]
        if config.served_model_name:
            argv += ["--served-model-name", config.served_model_name]
        return argv
