"""llama.cpp, two engines: the C++ ``llama-server`` and the Python ``llama_cpp.server``.

``llama-server -m MODEL --host H --port P --metrics`` plus flags: ``parallel`` -> ``-np``,
``ctx_size`` -> ``-c``, ``threads`` -> ``-t``, ``n_gpu_layers`` -> ``-ngl``; other names in
kebab case, booleans as ``--flag`` / ``--no-flag`` (``--cont-batching`` /
``--no-cont-batching``). Note that ``-c`` is the total context, split over the ``-np`` slots.
``--metrics`` is always passed (``llamacpp:`` prefix); ``/health`` answers 503 while the model
loads, then 200. API key: ``LLAMA_API_KEY``. It runs on CPU unless layers are offloaded, so
``uses_accelerator`` defaults to ``False``.

``python -m llama_cpp.server --model MODEL --host H --port P --interrupt_requests False`` (the
``llamacpp-python`` adapter) has quirks a tuner must know: it serves one request at a time
(requests queue behind a lock, so concurrency buys nothing), it has no ``/health`` (readiness is
``/v1/models``) and no ``/metrics`` (that step is skipped, with the reason), and by default a
new request *interrupts* the one in flight, which corrupts every concurrent benchmark; hence
``--interrupt_requests False``, always. Its settings are snake case with ``True``/``False``
values (``--n_ctx 4096 --n_threads 8 --n_gpu_layers 0``).

Examples::

    ServerConfig("/models/qwen2.5-0.5b-q4_k_m.gguf", {"parallel": 4, "ctx_size": 8192,
                 "threads": 8}, port=8080)
    -> llama-server -m /models/qwen2.5-0.5b-q4_k_m.gguf --host 127.0.0.1 --port 8080 --metrics
       -np 4 -c 8192 -t 8
    (llamacpp-python, {"n_ctx": 4096, "n_threads": 8})
    -> python -m llama_cpp.server --model M --host 127.0.0.1 --port 8080
       --interrupt_requests False --n_ctx 4096 --n_threads 8
"""

from __future__ import annotations

import sys

from tunegate.servers.adapters.base import BaseAdapter, ServerConfig
from tunegate.servers.adapters.flags import FlagRules

__all__ = ["LlamaCppAdapter", "LlamaCppPythonAdapter"]

_SERVER_ALIASES = {
    "parallel": "-np",
    "n_parallel": "-np",
    "ctx_size": "-c",
    "n_ctx": "-c",
    "threads": "-t",
    "n_threads": "-t",
    "n_gpu_layers": "-ngl",
}


class LlamaCppAdapter(BaseAdapter):
    """``llama-server`` (see the module docstring)."""

    name = "llamacpp"
    expected_metric_prefix = "llamacpp:"
    rules = FlagRules(bool_style="negate", aliases=_SERVER_ALIASES)
    api_key_env = "LLAMA_API_KEY"
    default_executable = ("llama-server",)
    default_uses_accelerator = False

    def base_argv(self, config: ServerConfig) -> list[str]:
        """``llama-server -m MODEL --host H --port P --metrics [--alias NAME]``."""
        argv = [*self.executable, "-m", config.model, "--host", config.host,
                "--port", str(config.port), "--metrics"]
        if config.served_model_name:
            argv += ["--alias", config.served_model_name]
        return argv


class LlamaCppPythonAdapter(BaseAdapter):
    """``python -m llama_cpp.server``: serial, no ``/health``, no ``/metrics``."""

    name = "llamacpp-python"
    expected_metric_prefix = None
    health_path = "/v1/models"
    rules = FlagRules(name_style="snake", bool_style="value", true_false=("True", "False"))
    api_key_flag = "--api_key"
    default_executable = (sys.executable, "-m", "llama_cpp.server")
    default_uses_accelerator = False

    def base_argv(self, config: ServerConfig) -> list[str]:
        """``... --model MODEL --host H --port P --interrupt_requests False``."""
        argv = [*self.executable, "--model", config.model, "--host", config.host,
                "--port", str(config.port), "--interrupt_requests", "False"]
        if config.served_model_name:
            argv += ["--model_alias", config.served_model_name]
        return argv
