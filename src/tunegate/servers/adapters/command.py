"""Any OpenAI-compatible server: an argv template plus flag rendering rules.

The template is an argv list whose items may contain ``{host}``, ``{port}`` and ``{model}``;
other braces are left alone (JSON arguments stay intact), an unknown ``{name}`` is an error.
Engine parameters are appended as flags by the configured :class:`FlagRules`: prefix, bool style
(``--flag``/``--no-flag``, ``--flag true|false``, or omitted when false), name style (kebab or
snake), aliases. The health path, metrics path and prefix, start-up budget and where the API key
goes are options. The fault tests drive their fake servers through this adapter.

Example::

    CommandAdapter(["my-server", "--listen", "{host}:{port}", "--weights", "{model}"],
                   bool_style="value", name_style="snake")
    ServerConfig("/m/w.bin", {"batch_size": 8, "use_cache": False}, port=9000)
    -> my-server --listen 127.0.0.1:9000 --weights /m/w.bin --batch_size 8 --use_cache false
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tunegate.errors import ConfigError
from tunegate.servers.adapters.base import BaseAdapter, ServerConfig
from tunegate.servers.adapters.flags import BoolStyle, FlagRules, NameStyle

__all__ = ["CommandAdapter"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KNOWN = ("host", "port", "model")


class CommandAdapter(BaseAdapter):
    """A generic server command (see the module docstring).

    Args:
        argv: The command template (an argv list, never a shell string).
        name: Adapter name used in logs and messages.
        flag_prefix, bool_style, name_style, true_false, aliases: Flag rendering rules.
        health_path, metrics_path: The server's endpoints.
        metric_prefix: Expected metric prefix (``None``: no metrics, the step is skipped).
        api_key_env, api_key_flag: Where the API key goes (environment preferred).
        startup_budget_s: Seconds from launch to a healthy server (default 120).
        **options: :class:`BaseAdapter` options (stop grace, accelerator, cwd).
    """

    name = "command"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str = "command",
        flag_prefix: str = "--",
        bool_style: BoolStyle = "negate",
        name_style: NameStyle = "kebab",
        true_false: tuple[str, str] = ("true", "false"),
        aliases: Mapping[str, str] | None = None,
        health_path: str = "/health",
        metrics_path: str = "/metrics",
        metric_prefix: str | None = None,
        api_key_env: str | None = None,
        api_key_flag: str | None = None,
        startup_budget_s: float = 120.0,
        stop_grace_s: float = 10.0,
        uses_accelerator: bool | None = None,
        min_memory_mib: float = 1024.0,
        cwd: str | None = None,
    ) -> None:
        if isinstance(argv, str) or not argv:
            raise ConfigError(
                f"{name}: argv must be a non-empty list such as ['my-server', '--port', "
                "'{port}'], not a shell string"
            )
        for item in argv:
            for placeholder in _PLACEHOLDER.findall(item):
                if placeholder not in _KNOWN:
                    raise ConfigError(
                        f"{name}: unknown placeholder {{{placeholder}}} in argv item {item!r}; "
                        "valid: {host}, {port}, {model}"
                    )
        if bool_style not in ("negate", "value", "omit"):
            raise ConfigError(f"{name}: bool_style={bool_style!r}; valid: negate, value, omit")
        if name_style not in ("kebab", "snake"):
            raise ConfigError(f"{name}: name_style={name_style!r}; valid: kebab, snake")
        if not health_path.startswith("/"):
            raise ConfigError(f"{name}: health_path={health_path!r} must start with '/'")
        self.name = name
        self.rules = FlagRules(prefix=flag_prefix, name_style=name_style, bool_style=bool_style,
                               true_false=true_false, aliases=dict(aliases or {}))
        self.health_path = health_path
        self.metrics_path = metrics_path
        self.expected_metric_prefix = metric_prefix
        self.api_key_env = api_key_env
        self.api_key_flag = api_key_flag
        super().__init__(executable=argv, startup_budget_s=startup_budget_s,
                         stop_grace_s=stop_grace_s, uses_accelerator=uses_accelerator,
                         min_memory_mib=min_memory_mib, cwd=cwd)

    def base_argv(self, config: ServerConfig) -> list[str]:
        """The template with ``{host}``, ``{port}`` and ``{model}`` filled in."""
        values = {"host": config.host, "port": str(config.port), "model": config.model}
        return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], item) for item in self.executable]
