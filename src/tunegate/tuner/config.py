"""``tunegate tune`` configuration: one TOML file, validated, with errors naming the field.

Sections (see the README for full examples)::

    [run]        mode ("sandbox" | "production"), budget (proposals), seed, approval
    [server]     adapter, model, scenario (simulator), host, port, options, env,
                 secret_env (env names to mask besides HF_TOKEN, *_API_KEY, *_SECRET...)
    [baseline]   the config the service runs today (engine parameters)
    [benchmark]  stream, endpoint, ignore_eos, request_timeout_s (the gauge's own settings)
    [workload]   tunegate.workload.WorkloadConfig fields
    [[space]]    one table per parameter: name, kind, layer, light, low/high/choices, ...
    [objective]  metric and direction; [[guardrails]] metric, direction, tolerance
    [gate]       repeats ("auto" = power analysis), min_effect, alpha, fdr, floor, ...
    [search]     early_stopping, eta, min_seen (stop clearly bad configs after one repeat);
                 slos ("p99_ttft_ms <= 3000": absolute limits) and objectives
                 ("p99_ttft_ms:lower": extra objectives after [objective], five in all at most)
    [report]     plots (write pareto.png and study.db at the end)
    [soak]       duration_s (or duration), window_s (or window, default 60), tolerance:
                 soak the recommendation before the run ends (the SOAK state)
    [attribution] metrics (reported beside the objective and guardrails), repeats ("auto" =
                 power analysis), max_repeats, max_factorial: measure which change did what
                 once the search is over (the ATTRIBUTE state; ``tunegate attribute`` later)
    [capacity]   slo, by, min_load, max_load, start, resolution, confidence, probe_requests,
                 max_probes, budget_s: with ``[objective] metric = "capacity"`` every
                 evaluation is a capacity search (:mod:`tunegate.tuner.capacity_eval`)
    [knowledge]  url (the knowledge base: a path or SQLAlchemy URL; default ``TUNEGATE_KB`` or
                 the user's data directory), record (the finished run), warm_start (from
                 earlier runs whose environment fingerprint matches)

Beyond each field's type, loading refuses what would only fail later, or never end: a metric
name no repeat can hold (:mod:`tunegate.tuner.metric_names`), a budget or repeat count outside
[1, :data:`MAX_BUDGET`] / [2, :data:`MAX_REPEATS`], ``inf`` or ``nan`` in any float, a searched
parameter without a starting value, and constraints no config of the space can meet
(:mod:`tunegate.search.constraints`).

Parameter names starting with ``benchmark.`` are benchmark settings (``benchmark.stream``), not
engine flags; their traffic light is usually ``must_change``.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import (
    AfterValidator,
    AliasChoices,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tunegate.errors import ConfigError, InputFileError
from tunegate.search.constraints import parse_constraints
from tunegate.search.objectives import (
    Objective,
    check_objectives,
)
from tunegate.search.space import Layer, Light, Param, SearchSpace
from tunegate.tuner.config_capacity import CapacitySection, capacity_objective_complaint
from tunegate.tuner.config_knowledge import KnowledgeSection
from tunegate.tuner.config_run import MAX_BUDGET, RunSection
from tunegate.tuner.config_search import SearchSection, Strict, parse_objective
from tunegate.tuner.metric_names import unknown_metric
from tunegate.workload import WorkloadConfig, format_validation_error

__all__ = ["MAX_BUDGET", "RunSection", "SearchSection", "TuneConfig", "load_config",
           "parse_objective"]


MAX_REPEATS = 1000
"""Repeats per config: power analysis asks for 394 per arm to detect a 1% change under 5%
run-to-run noise (``tunegate stats power --sigma 0.05 --effect 0.01 --method t``); past 1000 a
repeat only adds hours of benchmarking to a gate that has long decided."""


def _repeats(value: int) -> int:
    if value < 2:
        raise ValueError("at least 2 repeats: the gate's t-test needs two repeats per config to "
                         "see their spread")
    if value > MAX_REPEATS:
        raise ValueError(f"at most {MAX_REPEATS} repeats: power analysis asks for 394 per config "
                         "to detect a 1% change under 5% noise (tunegate stats power --sigma "
                         "0.05 --effect 0.01 --method t); more only adds hours of benchmarking")
    return value


def _repeats_or_auto(value: int | Literal["auto"]) -> int | Literal["auto"]:
    return value if value == "auto" else _repeats(value)


RepeatsOrAuto = Annotated[int | Literal["auto"], AfterValidator(_repeats_or_auto)]
"""A repeat count, or ``"auto"``: power analysis decides."""


def _metric(name: str) -> str:
    complaint = unknown_metric(name)
    if complaint is not None:
        raise ValueError(complaint)
    return name


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ServerSection(Strict):
    adapter: str = "simulator-virtual"
    model: str | None = None
    scenario: str = "seed"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    options: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list, description="names of env variables "
                                  "that hold secrets although their names do not say so "
                                  "(HF_TOKEN, *_API_KEY, *_SECRET... are masked anyway)")
    startup_budget_s: float = Field(default=600.0, gt=0)
    noise: bool = True

    @field_validator("secret_env")
    @classmethod
    def _secret_env_named(cls, names: list[str], info: ValidationInfo) -> list[str]:
        """Each name is an environment variable set in ``env``: a name that is not there is a
        typo, and the secret it meant would be written to the run directory. (A field
        validator, so that an error quotes the names, never the ``env`` values.)"""
        env = info.data.get("env") or {}
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, "
                                 "digits and _, not starting with a digit)")
            if name not in env:
                raise ValueError(f"{name!r} is not set in [server] env; list only variables "
                                 f"of env ({', '.join(sorted(env)) or 'it is empty'})")
        return names


class BenchmarkSection(Strict):
    stream: bool = True
    endpoint: Literal["completions", "chat"] = "completions"
    ignore_eos: bool = True
    request_timeout_s: float = Field(default=300.0, gt=0)


class SpaceParam(Strict):
    name: str
    kind: Literal["int", "log_int", "float", "bool", "categorical"]
    layer: Layer
    light: Light = Light.SITUATIONAL
    low: float | None = None
    high: float | None = None
    choices: list[Any] = Field(default_factory=list)
    default: Any = None
    required: Any = None
    reason: str = ""

    def to_param(self) -> Param:
        return Param(self.name, self.kind, self.layer, self.light, self.low, self.high,
                     tuple(self.choices), self.default, self.required, self.reason)


class MetricSection(Strict):
    metric: Annotated[str, AfterValidator(_metric)]
    direction: Literal["higher", "lower"] = "higher"
    tolerance: float = Field(default=0.05, ge=0)


class GateSection(Strict):
    repeats: RepeatsOrAuto = "auto"
    initial_repeats: Annotated[int, AfterValidator(_repeats)] = Field(
        default=3, description="baseline repeats before sigma")
    max_repeats: Annotated[int, AfterValidator(_repeats)] = 10
    min_effect: float = Field(default=0.05, gt=0, lt=1, description="effect power targets")
    alpha: float = Field(default=0.05, gt=0, lt=1)
    fdr: float = Field(default=0.05, gt=0, lt=1)
    multiplier: float = Field(default=2.0, gt=0)
    floor: float = Field(default=0.03, ge=0)
    power: float = Field(default=0.8, gt=0, lt=1)
    sequential: bool = Field(default=True, description="look after every repeat and stop as "
                             "soon as the always-valid gate decides (false: the planned "
                             "repeats, then Welch's test)")


class ReportSection(Strict):
    plots: bool = Field(default=True, description="write pareto.png and the Optuna study.db "
                        "at the end (false: summary.json and report.md only)")


class SoakSection(Strict):
    """The SOAK state: hours of load on the recommendation before the run ends."""

    duration_s: float = Field(gt=0, le=7 * 24 * 3600.0,
                              validation_alias=AliasChoices("duration_s", "duration"),
                              description="total load time, seconds")
    window_s: float = Field(default=60.0, gt=0,
                            validation_alias=AliasChoices("window_s", "window"),
                            description="window length, seconds")
    tolerance: float = Field(default=0.05, ge=0, lt=1, description="relative worsening of "
                             "an objective that makes the verdict degraded")

    @model_validator(mode="after")
    def _window_fits(self) -> SoakSection:
        if self.window_s > self.duration_s:
            raise ValueError(f"window_s {self.window_s:g} is longer than duration_s "
                             f"{self.duration_s:g}: a soak needs many windows (default 60 s)")
        return self


class AttributionSection(Strict):
    """The ATTRIBUTE state: the on/off control experiment behind the kept config."""

    metrics: list[Annotated[str, AfterValidator(_metric)]] = Field(
        default_factory=lambda: ["mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms"],
        description="metrics reported beside the objective and the guardrails")
    repeats: RepeatsOrAuto = Field(default="auto", description="repeats per config (auto: "
                                   "power analysis for the gate's threshold)")
    max_repeats: Annotated[int, AfterValidator(_repeats)] = 10
    max_factorial: int = Field(default=4, ge=1, le=5, description="engine changes up to which "
                               "every combination is measured (2^k configs); more: one at a "
                               "time")

    @model_validator(mode="after")
    def _repeats_within_the_cap(self) -> AttributionSection:
        if isinstance(self.repeats, int) and self.repeats > self.max_repeats:
            raise ValueError(f"attribution.repeats = {self.repeats} exceeds "
                             f"attribution.max_repeats = {self.max_repeats}")
        return self


class TuneConfig(Strict):
    """A whole tuning run's configuration (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    run: RunSection = RunSection()
    server: ServerSection = ServerSection()
    baseline: dict[str, Any] = Field(default_factory=dict)
    benchmark: BenchmarkSection = BenchmarkSection()
    workload: WorkloadConfig
    space: list[SpaceParam] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    objective: MetricSection = MetricSection(metric="output_throughput")
    guardrails: list[MetricSection] = Field(default_factory=list)
    gate: GateSection = GateSection()
    search: SearchSection = SearchSection()
    report: ReportSection = ReportSection()
    soak: SoakSection | None = None
    attribution: AttributionSection | None = None
    capacity: CapacitySection | None = None
    knowledge: KnowledgeSection = Field(default_factory=KnowledgeSection)

    @field_validator("space")
    @classmethod
    def _builds(cls, space: list[SpaceParam]) -> list[SpaceParam]:
        try:
            SearchSpace.of(p.to_param() for p in space)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return space

    @model_validator(mode="after")
    def _constraints_parse(self) -> TuneConfig:
        try:
            space = self.search_space()
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        for param in space.params:
            if param.kind not in ("bool", "categorical"):
                continue  # a numeric baseline outside the searched range is legitimate
            for where, value in (("baseline", self.baseline.get(param.name)),
                                 (f"space {param.name} default", param.default)):
                if value is not None and value not in param.values:
                    raise ValueError(f"{where}: {param.name} = {value!r} is not one of its "
                                     f"choices {list(param.values)}")
        return self

    @model_validator(mode="after")
    def _searched_params_start_somewhere(self) -> TuneConfig:
        """Every searched parameter needs a starting value (its ``default`` or a ``[baseline]``
        entry): the baseline is the search's first point and the gate's reference arm. A
        numeric one must start at a finite number."""
        for index, param in enumerate(self.space):
            if param.light is not Light.SITUATIONAL:
                continue
            start = self.baseline.get(param.name, param.default)
            where = f"space.{index} ({param.name})"
            if start is None:
                raise ValueError(f"{where}: a searched parameter needs a starting value: give "
                                 f"it a default in its [[space]] table or set {param.name} in "
                                 "[baseline]")
            numeric = param.kind in ("int", "log_int", "float")
            if numeric and (isinstance(start, bool) or not isinstance(start, int | float)
                            or not math.isfinite(start)):
                source = "baseline" if param.name in self.baseline else "default"
                raise ValueError(f"{where}: its {source} {start!r} is not a finite number")
        return self

    @model_validator(mode="after")
    def _repeats_within_the_cap(self) -> TuneConfig:
        """``[gate] repeats`` and ``initial_repeats`` stay within ``max_repeats``, the cap
        power analysis works under: a fixed count past it would measure more than the cap."""
        gate = self.gate
        for name, value in (("repeats", gate.repeats), ("initial_repeats", gate.initial_repeats)):
            if isinstance(value, int) and value > gate.max_repeats:
                raise ValueError(f"gate.{name} = {value} exceeds gate.max_repeats = "
                                 f"{gate.max_repeats}; lower it or raise max_repeats (at most "
                                 f"{MAX_REPEATS})")
        return self

    @model_validator(mode="after")
    def _capacity_objective_alone(self) -> TuneConfig:
        named = [g.metric for g in self.guardrails] + [
            o.metric for o in self.search.extra_objectives()] + (
            self.attribution.metrics if self.attribution else [])
        beside = [name for name, given in (
            ("[[guardrails]]", self.guardrails), ("[search] objectives", self.search.objectives),
            ("[search] slos", self.search.slos), ("[attribution]", self.attribution)) if given]
        complaint = capacity_objective_complaint(
            self.objective.metric, self.objective.direction, self.capacity, self.workload,
            named_elsewhere=named, beside=beside)
        if complaint is not None:
            raise ValueError(complaint)
        return self

    @model_validator(mode="after")
    def _objectives_fit(self) -> TuneConfig:
        """At most five objectives in all, ``[objective]`` first, no metric twice."""
        try:
            self.objectives()
        except ConfigError as exc:
            raise ValueError(f"search.objectives: {exc}") from None
        return self

    def objectives(self) -> tuple[Objective, ...]:
        """The search's objectives: ``[objective]``, then ``[search] objectives``."""
        first = Objective(self.objective.metric, self.objective.direction)
        return check_objectives([first, *self.search.extra_objectives()])

    def search_space(self) -> SearchSpace:
        params = [p.to_param() for p in self.space]
        rules = parse_constraints(self.constraints, params)
        return SearchSpace.of(params, rules)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json")
        return data


def load_config(path: Path) -> TuneConfig:
    """Read and validate a TOML tuning config.

    Raises:
        InputFileError: Missing or unreadable file, or invalid TOML (with the line).
        ConfigError: A field is invalid (one line per problem, naming it and its value).
    """
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file; pass --config PATH to a TOML file") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory; pass --config PATH to a TOML file") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text (byte {exc.start}); TOML files are "
                             "UTF-8: save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputFileError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise InputFileError(f"{path}: nested deeper than can be read; a tuning config needs "
                             "a few levels at most") from None
    try:
        return TuneConfig.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source=str(path))) from None
