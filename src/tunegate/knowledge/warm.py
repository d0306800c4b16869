"""Which earlier runs may warm-start a tuning run, and what they contribute.

An earlier run's numbers were measured in its environment. Its fingerprint says which one, and
:func:`tunegate.fingerprint.compare` judges it against this run's:

* ``exact``: the same engine and version, model, accelerator, workload and benchmark settings,
  and nothing else known to differ: its observations enter the model as if measured here
  (weight 1), its baseline noise is a prior for this run's;
* ``partial``: nothing that invalidates differs, but something else does (the driver, the
  kernel, a field unknown on one side): its observations enter with weight
  :data:`PARTIAL_WEIGHT` (the surrogate gives them extra noise, so this run's own data wins
  where they disagree), and its noise is not used;
* ``invalid``: the engine version, model, accelerator or workload changed, or could not be
  confirmed (unknown on a side), or the deployment's setup beside the searched parameters
  differs (``server.setup``: the adapter's options, the engine's environment, the parameters
  the space does not search): never used, listed with the fields.

Only the :data:`MAX_RUNS` newest usable runs contribute, so an old, large history cannot
outweigh what the newest runs know. Whatever the prior says, the tuner re-measures the baseline
and keeps nothing without this run's own gate: a prior only chooses what to measure.

:func:`plan_warm_start` is a pure function of its inputs (the tuner records them in its
``warm_start`` decision, so a replay re-derives the plan).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.fingerprint.compare import compare
from tunegate.fingerprint.fields import Fingerprint
from tunegate.stats.noise import pooled_sigma

__all__ = ["MAX_RUNS", "PARTIAL_WEIGHT", "plan_warm_start"]

PARTIAL_WEIGHT = 0.5
"""The model's trust in a partially matching run's observations (1 = measured here)."""
MAX_RUNS = 3
"""The newest usable runs that contribute; older ones are listed as ``superseded``."""


def plan_warm_start(fingerprint: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]],
                    objective: str, setup: str | None = None) -> dict[str, Any]:
    """The warm start a run with ``fingerprint`` takes from ``candidates``.

    Args:
        fingerprint: This run's fingerprint (its JSON form).
        candidates: Earlier runs, newest first, each ``{"id", "recorded_at", "fingerprint",
            "noise": {metric: relative sigma}, "noise_repeats": int, "trials": [{"trial",
            "config", "value", "values"}]}`` with ``value`` the objective as this run's search
            scores it (``None``: the config failed to start).
        objective: The gated objective metric (whose baseline noise is the prior).
        setup: A digest of what runs beside the searched parameters (the server's options,
            environment, the parameters the space does not search); a candidate whose
            ``setup`` differs is invalid (field ``server.setup``). ``None``: not compared.

    Returns:
        ``{"used": [...], "invalid": [...], "superseded": [...], "events": [...], "noise":
        {"sigma", "repeats", "runs"} | None}``: ``used`` each run with its ``match``,
        ``weight``, ``differences`` and number of observations; ``invalid`` each refused run
        with the fields that invalidate it (``name``, ``before``, ``after``); ``events`` the
        proposer's ``learn`` events (``run`` is ``kb:<id>``); ``noise`` the exact matches'
        pooled baseline noise of ``objective``.
    """
    here = Fingerprint.from_json(fingerprint)
    used: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    superseded: list[str] = []
    events: list[dict[str, Any]] = []
    pooled: list[tuple[float, int]] = []
    for candidate in candidates:
        comparison = compare(Fingerprint.from_json(candidate["fingerprint"]), here)
        fields = [{"name": d.name, "before": d.before.value, "after": d.after.value}
                  for d in comparison.differences if d.invalidates]
        if setup is not None and candidate.get("setup") != setup:
            fields.append({"name": "server.setup", "before": candidate.get("setup"),
                           "after": setup})
        if fields:
            invalid.append({"id": candidate["id"], "fields": fields})
            continue
        if len(used) >= MAX_RUNS:
            superseded.append(str(candidate["id"]))
            continue
        weight = 1.0 if comparison.verdict == "exact" else PARTIAL_WEIGHT
        trials = list(candidate["trials"])
        used.append({"id": candidate["id"], "recorded_at": candidate.get("recorded_at"),
                     "match": comparison.verdict, "weight": weight,
                     "differences": [d.name for d in comparison.differences],
                     "observations": len(trials)})
        events += [{"op": "learn", "run": f"kb:{candidate['id']}", "trial": int(t["trial"]),
                    "config": dict(t["config"]), "value": t["value"],
                    "values": dict(t.get("values") or {}), "weight": weight, "prior": True}
                   for t in trials]
        sigma = (candidate.get("noise") or {}).get(objective)
        repeats = int(candidate.get("noise_repeats") or 0)
        if comparison.verdict == "exact" and sigma is not None and repeats >= 2:
            pooled.append((float(sigma), repeats))
    return {"used": used, "invalid": invalid, "superseded": superseded, "events": events,
            "noise": _pooled_noise(pooled)}


def _pooled_noise(samples: Sequence[tuple[float, int]]) -> dict[str, Any] | None:
    """The pooled relative sigma of several runs' baselines (each ``(sigma, repeats)``,
    weighted by its degrees of freedom), or ``None`` without any.

    Example:
        >>> _pooled_noise([(0.02, 3), (0.04, 3)])["sigma"]
        0.031623
    """
    if not samples:
        return None
    sigma, repeats = samples[0]
    for other_sigma, other_repeats in samples[1:]:
        sigma, repeats = pooled_sigma(sigma, repeats, other_sigma, other_repeats)
    return {"sigma": round(sigma, 6), "repeats": repeats, "runs": len(samples)}
