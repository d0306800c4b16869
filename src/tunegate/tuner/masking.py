"""Secrets in a tuning config: masked wherever the run directory records them, real for the engine.

A ``[server] env`` value is a secret when its name says so (``HF_TOKEN``, ``*_API_KEY``,
``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``:
:func:`tunegate.servers.adapters.base.is_secret_env`) or when ``[server] secret_env`` lists
its name. The run directory never holds its value:

* :func:`recorded_config` is the config as the journal's ``config`` record and every proposal
  decision's ``inputs`` hold it, each secret replaced by :data:`MASK`;
* :func:`scrub` masks the values in any text or JSON a run writes besides (``summary.json``,
  ``report.md``), should an engine's message have quoted one;
* the adapters mask the values in their logs (:class:`~tunegate.servers.adapters.ServerConfig`
  carries ``secret_env``).

The engine still gets the real value: a fresh run holds it in memory from the config file. A
resumed run (``tune --resume``) and ``tunegate rollback`` read the config back from the journal,
where it is masked, so :func:`engine_env` takes each masked value from the caller's environment
(``export HF_TOKEN=...`` before resuming) and refuses, in one line naming the variable, when it
is not there: a server started with ``***`` as its token would fail later and less clearly.

Why digests and replays use the masked form: a decision is computed on exactly the inputs it
records, so the live run hands the proposer the masked config too, and ``tunegate replay``
re-runs the same function on the same bytes and compares the same hashes. No decider reads an
environment value, so masking changes no decision. The alternative, hashing the real values
while storing masked ones, would make every stored digest a fingerprint of the secret (a short
token can be recovered from its hash by trying candidates) and a digest replay could never
recompute.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from tunegate.errors import ConfigError
from tunegate.loadgen.redact import MASK, mask_secrets
from tunegate.servers.adapters.base import is_secret_env, mask_env
from tunegate.tuner.config import ServerSection, TuneConfig

__all__ = ["MASK", "engine_env", "recorded_config", "scrub", "secret_values"]

MIN_SCRUBBED = 4
"""Secret values shorter than this are masked by name only, never searched for in text: a
two-letter "secret" would mask ordinary words (the adapters' log filter has the same rule)."""


def recorded_config(config: TuneConfig) -> dict[str, Any]:
    """``config.to_json()`` with every secret ``[server] env`` value replaced by :data:`MASK`:
    what the journal and the decisions hold (see the module docstring)."""
    data = config.to_json()
    server = data["server"]
    server["env"] = mask_env(server["env"], server.get("secret_env") or ())
    return data


def secret_values(config: TuneConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """The real secret values of ``[server] env`` long enough to search for in text: the
    config's own, or for a config read back from a journal (masked) the environment's, which
    :func:`engine_env` gives the engine."""
    source = os.environ if environ is None else environ
    server = config.server
    found = []
    for name, value in server.env.items():
        if not is_secret_env(name, server.secret_env):
            continue
        real = source.get(name, "") if value == MASK else value
        if real != MASK and len(real) >= MIN_SCRUBBED:
            found.append(real)
    return found


def engine_env(server: ServerSection, environ: Mapping[str, str] | None = None
               ) -> dict[str, str]:
    """``[server] env`` as the engine must get it: each masked secret (a config read back from
    a journal) taken from ``environ`` (default ``os.environ``).

    Raises:
        ConfigError: A masked secret is not set in ``environ``.
    """
    source = os.environ if environ is None else environ
    env = dict(server.env)
    for name, value in server.env.items():
        if value != MASK or not is_secret_env(name, server.secret_env):
            continue
        if name not in source:
            raise ConfigError(
                f"[server] env {name}: the run directory holds it masked ({MASK}; secrets are "
                f"never written there); export {name}=<its value> and run the command again")
        env[name] = source[name]
    return env


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-like) with every secret masked in each string, keys included."""
    found = [s for s in secrets if s]
    if not found:
        return value
    if isinstance(value, str):
        return mask_secrets(value, found)
    if isinstance(value, Mapping):
        return {scrub(k, found): scrub(v, found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, found) for v in value]
    return value
