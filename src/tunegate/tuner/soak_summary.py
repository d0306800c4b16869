"""What the SOAK state adds to a run's summary: whether the recommendation is delivered, and the
report's Soak section."""

from __future__ import annotations

from typing import Any

from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.runstate import RunState

__all__ = ["delivered", "soak_section"]


def delivered(recommendation: dict[str, Any], rs: RunState) -> dict[str, Any]:
    """``delivered``: false when the recommendation failed its soak or production mode did not
    confirm its delivery after the soak (the params stay, for the record)."""
    withheld = rs.end_reason is EndReason.SOAK_DEGRADED or (
        rs.soak is not None and rs.soak.get("confirmed") in ("no", "absent"))
    recommendation["delivered"] = recommendation["params"] is not None and not withheld
    if withheld and rs.soak is not None:
        why = ("failed its soak (degraded)" if rs.end_reason is EndReason.SOAK_DEGRADED
               else "its delivery after the soak was not confirmed")
        recommendation["wording"] = f"NOT DELIVERED: the recommendation {why}; " + \
            recommendation["wording"]
    return recommendation


def soak_section(summary: dict[str, Any]) -> list[str]:
    soak = summary.get("soak")
    if not soak:
        return []
    verdict = soak.get("verdict") or soak.get("status", "not judged")
    lines = ["## Soak", "", f"Verdict: **{verdict}** over {soak['windows']} windows"
             + (f" of {soak['window_s']:g} s" if "window_s" in soak else "")
             + (f" ({soak['valid_windows']} valid)" if "valid_windows" in soak else "")
             + ".", ""]
    lines += [f"- {line}" for line in soak["evidence"]]
    if soak.get("plot"):
        lines += ["", f"![soak]({soak['plot']})"]
    return [*lines, ""]
