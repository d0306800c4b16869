"""SGLang: ``python -m sglang.launch_server --model-path MODEL --host H --port P``.

SGLang's flags are kebab case (``--max-running-requests``, ``--chunked-prefill-size``,
``--mem-fraction-static``, ``--tp-size``, ``--schedule-policy``) and are checked against the
flag list read from SGLang's own parser (``engine_flags/sglang-<version>.json``, newest shipped
by default; adapter option ``engine_version`` or ``engine_flags`` for another).

Booleans. SGLang's booleans are ``store_true`` switches without a negative form
(``--disable-radix-cache``, ``--enable-mixed-chunk``): true is the flag, false is the flag left
out. Left out means false only when the switch's default is false; for a switch whose default
is ``None`` (``--enable-multimodal``: the engine decides) false cannot be said, so such a
config is refused before launch. Even an explicit value may be changed by SGLang itself: it
*resolves* some arguments after parsing (``--disable-overlap-schedule``, ``--page-size``, ...).
So after every start, verification reads what the engine runs (``GET /server_info``, the
resolved values; ``/get_server_info`` on older versions) and fails the ``engine_args`` step when
any parameter the config sets runs with another value: the run must never record ``False``
while the engine runs ``True``. Both, because refusing at config time catches only what the
parser shows, and only the running engine knows what it resolved.

The API key never goes on the command line (``ps`` shows every argument to every user).
SGLang 0.5.23 reads it from no environment variable (its sources have none; only
``--api-key``), but it reads ``--config FILE``, a YAML file whose keys are flag names, merged
into its arguments in-process. So :meth:`SGLangAdapter.prepare` writes ``api-key`` to such a
file (mode 0600, created exclusively), passes ``--config FILE``, and deletes the file once
the start is over (SGLang reads it while parsing its arguments, before it listens). The file
lives under ``$XDG_RUNTIME_DIR`` when that is a writable directory (the user's own tmpfs,
mode 0700, emptied at logout: the key never reaches a disk), else in the log directory. It
exists for the whole start, model load included (minutes), and a SIGKILL of tunegate during
the start leaves it behind (``*.secret.yaml``, still 0600: delete it by hand). A config
that sets its own ``config`` parameter cannot also carry an API key (SGLang takes one file).
``--enable-metrics`` is always passed: verification needs ``/metrics`` (``sglang:`` prefix).
Health: ``/health``.

Example::

    ServerConfig("Qwen/Qwen2.5-7B-Instruct", {"max_running_requests": 128,
                 "chunked_prefill_size": 4096, "mem_fraction_static": 0.85,
                 "enable_mixed_chunk": False}, port=30000)
    -> python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1
       --port 30000 --enable-metrics --max-running-requests 128 --chunked-prefill-size 4096
       --mem-fraction-static 0.85
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tunegate.errors import ConfigError
from tunegate.servers.adapters.base import BaseAdapter, ServerConfig
from tunegate.servers.adapters.flags import FlagRules, split_params
from tunegate.servers.launch import LaunchSpec

__all__ = ["SGLangAdapter"]


class SGLangAdapter(BaseAdapter):
    """``python -m sglang.launch_server`` (see the module docstring)."""

    name = "sglang"
    expected_metric_prefix = "sglang:"
    rules = FlagRules(bool_style="omit")
    flags_engine = "sglang"
    server_info_paths = ("/server_info", "/get_server_info")
    default_executable = (sys.executable, "-m", "sglang.launch_server")

    def base_argv(self, config: ServerConfig) -> list[str]:
        """``... --model-path MODEL --host H --port P --enable-metrics``."""
        argv = [*self.executable, "--model-path", config.model, "--host", config.host,
                "--port", str(config.port), "--enable-metrics"]
        if config.served_model_name:
            argv += ["--served-model-name", config.served_model_name]
        return argv

    def render(self, config: ServerConfig) -> LaunchSpec:
        """See :meth:`BaseAdapter.render`; ``enable_metrics=False`` is refused.

        Raises:
            ConfigError: As the base render, or metrics turned off (always passed).
        """
        flags, _ = split_params(config.params, adapter=self.name)
        if flags.get("enable_metrics") is False:
            raise ConfigError(f"{self.name}: enable_metrics=False cannot apply: tunegate always "
                              "passes --enable-metrics, since verification reads /metrics; "
                              "remove enable_metrics from the config")
        return super().render(config)

    def prepare(self, config: ServerConfig,
                log_dir: Path) -> tuple[LaunchSpec, Callable[[], None]]:
        """The rendered spec plus ``--config FILE`` holding the API key (removed afterwards).

        Raises:
            ConfigError: The config sets its own ``config`` file and an API key.
        """
        spec = self.render(config)
        if not config.api_key:
            return spec, lambda: None
        flags, _ = split_params(config.params, adapter=self.name)
        if flags.get("config") is not None:
            raise ConfigError(
                f"{self.name}: the config sets config={flags['config']!r} and an API key; "
                "SGLang reads one --config file: put api-key in that file and drop the key "
                "from tunegate's config")
        folder = _key_folder(log_dir)
        path = folder / f"tunegate-sglang-{config.port}-{secrets.token_hex(4)}.secret.yaml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"api-key: {json.dumps(config.api_key)}\n")  # JSON strings are YAML

        def remove() -> None:
            path.unlink(missing_ok=True)

        return replace(spec, argv=(*spec.argv, "--config", str(path))), remove


def _key_folder(log_dir: Path) -> Path:
    """``$XDG_RUNTIME_DIR`` (a private tmpfs) when usable, else the log directory (created)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK | os.X_OK):
        return Path(runtime)
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir
