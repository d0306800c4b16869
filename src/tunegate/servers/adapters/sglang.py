"""SGLang: ``python -m sglang.launch_server --model-path MODEL --host H --port P``.

SGLang's flags are kebab case (``--max-running-requests``, ``--chunked-prefill-size``,
``--mem-fraction-static``, ``--tp-size``, ``--schedule-policy``); its booleans are store-true
switches without a negative form (``--disable-radix-cache``, ``--enable-torch-compile``), so a
false boolean is left out. ``--enable-metrics`` is always passed: verification needs
``/metrics`` (``sglang:`` prefix). SGLang reads its API key only from ``--api-key``; the value
is masked in logs and messages. Health: ``/health``.

Example::

    ServerConfig("Qwen/Qwen2.5-7B-Instruct", {"max_running_requests": 128,
                 "chunked_prefill_size": 4096, "mem_fraction_static": 0.85}, port=30000)
    -> python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1
       --port 30000 --enable-metrics --max-running-requests 128 --chunked-prefill-size 4096
       --mem-fraction-static 0.85
"""

from __future__ import annotations

import sys

from tunegate.servers.adapters.base import BaseAdapter, ServerConfig
from tunegate.servers.adapters.flags import FlagRules

__all__ = ["SGLangAdapter"]


class SGLangAdapter(BaseAdapter):
    """``python -m sglang.launch_server`` (see the module docstring)."""

    name = "sglang"
    expected_metric_prefix = "sglang:"
    rules = FlagRules(bool_style="omit")
    api_key_flag = "--api-key"
    default_executable = (sys.executable, "-m", "sglang.launch_server")

    def base_argv(self, config: ServerConfig) -> list[str]:
        """``... --model-path MODEL --host H --port P --enable-metrics``."""
        argv = [*self.executable, "--model-path", config.model, "--host", config.host,
                "--port", str(config.port), "--enable-metrics"]
        if config.served_model_name:
            argv += ["--served-model-name", config.served_model_name]
        return argv
