"""Everything a tuning run knows, as one JSON-serialisable record.

The driver journals a snapshot of this state at every transition, and every measurement as its
own record in between. Resuming = the last snapshot, then the measurements journalled after it
(:meth:`RunState.absorb`), so a measurement is neither lost nor counted twice after a crash at
any point.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from tunegate.tuner.outcomes import Candidate, EndReason, TrialVerdict
from tunegate.tuner.states import State

__all__ = ["CAPACITY_LOG_KEYS", "RunState"]

CAPACITY_LOG_KEYS = ("capacity", "capacity_ci_low", "capacity_ci_high", "capacity_unit",
                     "capacity_binding_slo", "capacity_status", "capacity_probes",
                     "capacity_reused_probes", "capacity_benchmark_s")
"""What :attr:`RunState.capacity_log` keeps of each capacity search's summary."""


@dataclass
class RunState:
    """The run's memory.

    Attributes:
        state: The state being entered (resume re-runs its handler).
        bench: Benchmark settings in force (``stream`` ...); must-change fixes edit them.
        baseline: Engine parameters of the service as given.
        kept / kept_trial / kept_decision: The last kept config, its trial and the decision
            that produced it: the one rollback target.
        kept_values: The kept config's valid repeats, per metric: the gate's baseline arm.
        sigma: Relative noise of each metric, from the baseline repeats.
        repeats: Repeats per arm the gate needs (power analysis).
        candidate: The proposal under test or ``None``.
        candidate_values: Its valid repeats, per metric.
        verdict: How the candidate's trial ended, once known (ROLLBACK reads it).
        trial_decisions: The decisions about the candidate so far, by role (``gate``,
            ``early_stop``, ``slo``), for its line in ``trials_log``.
        gate_evidence: The objective's evidence in the candidate's gate record (the story).
        last_proposal: ``[decision id, history length]`` of the newest ``proposer`` decision:
            the next one records only the history after it (linear ``decisions.jsonl``).
        first_scores: Objective after each config's first valid repeat, sign-adjusted so
            higher is better, by trial (as a string: JSON keys): the rung early stopping ranks
            a candidate against. The baseline is trial ``"0"``. Absent from snapshots written
            before early stopping existed (it then starts empty).
        last_measurement: The newest measurement, until VALIDATE consumes it.
        last_restart: The newest restart outcome, until VERIFY_START reads it.
        failed_starts: Consecutive failed starts (two end the run as ENVIRONMENT_ABNORMAL).
        trials: Proposals made. rounds_since_keep: for the patience rule.
        measurements: Measurements taken (names files, draws the simulator's noise).
        history: The proposer's ask/register/tell events (rebuilds it on resume and replay).
        search_budget: The budget that chose the proposer, pinned when the baseline is
            registered. A resumed run or a replay rebuilds the proposer from ``history``, and
            ``ask`` events do not hold configs, so it must stay the strategy that made the earlier
            proposals: ``--resume --budget N`` changes when the run stops, not the strategy.
            ``None`` (snapshots from before the budget chose the strategy): unknown, which
            selects Bayesian optimisation, as those runs had.
        remedies: Known fixes still to try, from the baseline's findings.
        rechecks: Objective values of the kept config's drift re-checks.
        rechecked_at: The trial count of the last drift re-check (one per count).
        arm_given_up: The kept trial whose arm RECHECK stopped completing (an invalid or
            failed repeat of the kept config): later gates use the arm as it is.
        trials_log: One line per finished trial for the summary.
        story: What happened, in words, for the summary and the report.
        engine_state: The engine's :meth:`~tunegate.servers.engine.Engine.snapshot` (the
            virtual simulator's age and starts; a real server's process group).
        preflight: The first measurement of the service as given (must-change fixes).
        baseline_values / baseline_invalid: Baseline repeats so far and consecutive invalid
            ones, so a crash in BASELINE resumes where it was.
        reason: Why the run ended (final states), in words.
        end_reason: The same, typed (the CLI's exit code).
        attribution: The ATTRIBUTE state's (or ``tunegate attribute``'s) summary once it
            ended: the verdict per change, the directory of ``attribution.json``.
        soak: The SOAK state's outcome (verdict, evidence, windows, directory) once it ended.
        fingerprint: The environment fingerprint taken in BASELINE (its JSON form).
        warm_start: The warm start decided then (runs used, refused and why, the noise prior;
            ``None``: none was decided: ``[knowledge] warm_start`` off, or no knowledge base).
        run_id: This run's identity: its name in a shared study (``[search] study``) and its
            key in the knowledge base; drawn once when the run starts, kept across resumes,
            so its own results are never read back as another run's (empty in snapshots
            written before the first one).
        capacity_epoch: Drifts seen under the capacity objective: probes journalled in an
            earlier epoch measured another machine and are never reused (the probes stay in
            the journal, not here: a snapshot holding them would grow with every probe).
        capacity_searches: Capacity searches finished (numbers the next one's probes).
        capacity_log: One row per finished capacity search (the summary's ``capacity``).
    """

    state: State = State.LEASE
    bench: dict[str, Any] = field(default_factory=dict)
    baseline: dict[str, Any] = field(default_factory=dict)
    kept: dict[str, Any] | None = None
    kept_trial: int | None = None
    kept_decision: str | None = None
    kept_values: dict[str, list[float]] = field(default_factory=dict)
    sigma: dict[str, float] = field(default_factory=dict)
    repeats: int = 0
    candidate: Candidate | None = None
    candidate_values: dict[str, list[float]] = field(default_factory=dict)
    verdict: TrialVerdict | None = None
    trial_decisions: dict[str, str] = field(default_factory=dict)
    gate_evidence: dict[str, Any] = field(default_factory=dict)
    last_proposal: list[Any] | None = None
    first_scores: dict[str, float] = field(default_factory=dict)
    last_measurement: dict[str, Any] | None = None
    last_restart: dict[str, Any] | None = None
    failed_starts: int = 0
    trials: int = 0
    rounds_since_keep: int = 0
    measurements: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    search_budget: int | None = None
    remedies: list[dict[str, Any]] = field(default_factory=list)
    rechecks: list[float] = field(default_factory=list)
    rechecked_at: int = 0
    arm_given_up: int | None = None
    trials_log: list[dict[str, Any]] = field(default_factory=list)
    story: list[str] = field(default_factory=list)
    engine_state: dict[str, Any] = field(default_factory=dict)
    preflight_done: bool = False
    preflight: dict[str, Any] | None = None
    baseline_values: dict[str, list[float]] = field(default_factory=dict)
    baseline_invalid: int = 0
    baseline_findings: list[str] = field(default_factory=list)
    reason: str = ""
    end_reason: EndReason | None = None
    soak: dict[str, Any] | None = None
    attribution: dict[str, Any] | None = None
    fingerprint: dict[str, Any] | None = None
    warm_start: dict[str, Any] | None = None
    run_id: str = ""
    capacity_epoch: int = 0
    capacity_searches: int = 0
    capacity_log: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A deep copy as plain JSON types (the journal's snapshot); a JSON round trip copies
        several times faster than :func:`dataclasses.asdict`, and the state is JSON anyway."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["state"] = self.state.value
        data["candidate"] = self.candidate.to_json() if self.candidate else None
        copied: dict[str, Any] = json.loads(json.dumps(data))
        return copied

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["state"] = State(values["state"])
        if data.get("candidate"):
            values["candidate"] = Candidate.from_json(data["candidate"])
        if data.get("verdict"):
            values["verdict"] = TrialVerdict(data["verdict"])
        if data.get("end_reason"):
            values["end_reason"] = EndReason(data["end_reason"])
        if "adapter_state" in data and "engine_state" not in data:  # before the Engine
            values["engine_state"] = data["adapter_state"]
        return cls(**values)

    def absorb(self, measurement: dict[str, Any]) -> None:
        """Fold a journalled measurement in (live, and again when resuming after a crash)."""
        self.measurements = max(self.measurements, int(measurement["index"]) + 1)
        role = measurement["role"]
        if role in ("capacity_probe", "capacity_anchor"):
            return  # read back from the journal by the search that needs them
        if "capacity_search" in measurement:  # a capacity search ended: the next is new
            self.capacity_searches = int(measurement["capacity_search"]) + 1
            self.capacity_log.append({
                "search": measurement["capacity_search"], "role": role,
                "trial": measurement["trial"], "file": measurement["records_file"],
                **{k: measurement["summary"].get(k) for k in CAPACITY_LOG_KEYS}})
        if role == "preflight":
            self.preflight = measurement
        elif role == "attribution":
            return  # the attribution reads its repeats from the journal, by cell and round
        elif role == "baseline":
            self.baseline_findings = list(measurement["findings"])
            if not measurement["valid"]:
                self.baseline_invalid += 1
                return
            self.baseline_invalid = 0
            for name, value in measurement["values"].items():
                if value is not None:
                    self.baseline_values.setdefault(name, []).append(float(value))
        else:
            self.last_measurement = {**measurement, "consumed": False}
