"""Post-start verification: "process running" is not "service usable".

Each check is one recorded :class:`StepResult` (name, status, detail, duration) in a
:class:`VerificationReport`:

1. ``healthy``: the health path answers HTTP 200;
2. ``model``: ``/v1/models`` lists the expected model name;
3. ``completion``: a real streamed completion (tiny prompt, ``max_tokens`` 4, through
   :func:`tunegate.loadgen.client.send_request`) returns at least one token;
4. ``metrics``: the metrics endpoint shows a sample with the engine's prefix (``vllm:``, ...);
5. ``engine_args`` (engines that report their arguments, e.g. SGLang's ``/server_info``):
   every engine parameter the config sets runs with that value. An engine may decide a value
   itself (SGLang resolves some arguments after parsing; a switch left out means "engine
   default"), and a run that records ``False`` while the engine runs ``True`` would label its
   numbers with the wrong config: a difference fails the step, naming each parameter. An
   engine that does not answer is *skipped* with the reason, never passed. A parameter the
   engine's answer does not list was not verified, neither confirmed nor contradicted: the
   step passes for the parameters it compared (failing would reject every config that sets
   a flag the engine does not echo; skipping would hide the ones it did confirm), and the
   others are carried as :attr:`StepResult.unverified`, quoted in the detail and in
   :meth:`VerificationReport.summary` (``not verified: x, y``). When none could be compared
   the step is skipped;
6. ``accelerator_memory``: ``nvidia-smi`` (or ``npu-smi info``) shows device memory in use at
   least the expected weights' size. Without such a tool the step is *skipped* with the reason
   recorded, never passed.

:attr:`VerificationReport.usable` is true only if every step that ran passed. Read-only GETs use
the standard library without proxies; the one completion goes through loadgen, the only
client-side code that measures.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

import aiohttp

from tunegate.loadgen.client import ClientConfig, send_request
from tunegate.loadgen.records import Outcome
from tunegate.loadgen.redact import mask_secrets
from tunegate.workload.spec import RequestSpec

__all__ = [
    "AcceleratorProbe",
    "AcceleratorReading",
    "CheckOutcome",
    "EngineArgsCheck",
    "HttpAnswer",
    "StepResult",
    "StepStatus",
    "VerificationReport",
    "check_completion",
    "check_engine_args",
    "http_get",
    "list_models",
    "probe_accelerator_memory",
    "run_step",
    "verify_server",
]

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_MAX_BODY = 1 << 20


@dataclass(frozen=True, slots=True)
class AcceleratorReading:
    """Device memory in use, per device, or why it could not be read.

    Attributes:
        tool: ``nvidia-smi`` or ``npu-smi`` (empty when neither is present).
        used_mib: Memory in use per device, MiB.
        skipped_reason: Set when no tool is present: the step is skipped, not passed.
        error: Set when the tool is present but its output could not be read.
    """

    tool: str
    used_mib: tuple[float, ...] = ()
    skipped_reason: str | None = None
    error: str | None = None


AcceleratorProbe = Callable[[], AcceleratorReading]
"""Reads accelerator memory (injectable for tests)."""

_NPU_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def _run_tool(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20.0, check=False,
                          env={**os.environ, "LC_ALL": "C"})
    if done.returncode != 0:
        raise OSError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


def probe_accelerator_memory() -> AcceleratorReading:
    """``nvidia-smi`` memory.used per GPU, else ``npu-smi info`` HBM usage per NPU.

    ``npu-smi info`` prints a table; the device rows carry ``used / total`` pairs and the last
    pair of a row with two of them is HBM usage (MB). Best effort, stated as such.
    """
    if shutil.which("nvidia-smi"):
        tool = "nvidia-smi"
        try:
            out = _run_tool([tool, "--query-gpu=memory.used", "--format=csv,noheader,nounits"])
            used = tuple(float(x) for x in out.split() if x.strip())
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            return AcceleratorReading(tool, error=f"{tool} failed: {exc}")
        if not used:
            return AcceleratorReading(tool, error=f"{tool} listed no GPU")
        return AcceleratorReading(tool, used)
    if shutil.which("npu-smi"):
        tool = "npu-smi"
        try:
            out = _run_tool([tool, "info"])
        except (OSError, subprocess.TimeoutExpired) as exc:
            return AcceleratorReading(tool, error=f"{tool} failed: {exc}")
        rows = [_NPU_PAIR.findall(line) for line in out.splitlines()]
        hbm = tuple(float(pairs[-1][0]) for pairs in rows if len(pairs) >= 2)
        if not hbm:
            return AcceleratorReading(tool, error=f"{tool} info: no HBM usage found in its table")
        return AcceleratorReading(tool, hbm)
    return AcceleratorReading(
        "", skipped_reason="neither nvidia-smi nor npu-smi is on PATH: accelerator memory "
        "not checked (not a pass)")


class StepStatus(StrEnum):
    """Result of one verification step."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class StepResult:
    """One verification step.

    Attributes:
        name: ``start``, ``healthy``, ``model``, ``completion``, ``metrics``,
            ``engine_args``, ``accelerator_memory``.
        status: Passed, failed, or skipped (``detail`` says why it was skipped).
        detail: What was observed (never a secret).
        duration_s: Wall time the step took.
        unverified: What the step was asked to check and could not (``engine_args``: the
            parameters the engine did not report); its status covers only the rest.
    """

    name: str
    status: StepStatus
    detail: str
    duration_s: float = 0.0
    unverified: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The step ran and passed."""
        return self.status is StepStatus.PASSED

    @property
    def skipped(self) -> bool:
        """The step could not run here; its reason is in ``detail``."""
        return self.status is StepStatus.SKIPPED


@dataclass(slots=True)
class VerificationReport:
    """All steps of one verification, in order."""

    adapter: str
    base_url: str
    steps: list[StepResult] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        """True only if at least one step ran and every step that ran passed."""
        ran = [s for s in self.steps if not s.skipped]
        return bool(ran) and all(s.ok for s in ran)

    @property
    def failures(self) -> list[StepResult]:
        """The failed steps."""
        return [s for s in self.steps if s.status is StepStatus.FAILED]

    def step(self, name: str) -> StepResult | None:
        """The step called ``name``, if it ran or was skipped."""
        return next((s for s in self.steps if s.name == name), None)

    @property
    def unverified(self) -> list[str]:
        """Everything a step that ran was asked to check and could not, in step order."""
        return [name for s in self.steps if not s.skipped for name in s.unverified]

    def summary(self) -> str:
        """One line: ``usable`` (with what was skipped or not verified) or the failed steps."""
        if self.usable:
            notes = [f"skipped: {', '.join(s.name for s in self.steps if s.skipped)}"] if any(
                s.skipped for s in self.steps) else []
            if self.unverified:
                notes.append(f"not verified: {', '.join(self.unverified)}")
            return "usable" + (f" ({'; '.join(notes)})" if notes else "")
        return "not usable: " + "; ".join(f"{s.name}: {s.detail}" for s in self.failures)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for the journal and ``decisions.jsonl``)."""
        steps = []
        for s in self.steps:
            d = asdict(s)
            d["status"] = s.status.value
            d["duration_s"] = round(s.duration_s, 6)
            d["unverified"] = list(s.unverified)
            steps.append(d)
        return {"adapter": self.adapter, "base_url": self.base_url, "usable": self.usable,
                "unverified": self.unverified, "steps": steps}


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A GET's status (``None``: no answer) and body text, or why it failed."""

    status: int | None
    body: str = ""
    error: str | None = None


def http_get(url: str, *, timeout_s: float = 5.0, api_key: str | None = None) -> HttpAnswer:
    """GET ``url`` without proxies; never raises for network trouble."""
    request = urllib.request.Request(url, method="GET")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with _NO_PROXY.open(request, timeout=timeout_s) as response:
            body = response.read(_MAX_BODY).decode("utf-8", errors="replace")
            return HttpAnswer(int(response.status), body)
    except urllib.error.HTTPError as exc:
        return HttpAnswer(exc.code, "", f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return HttpAnswer(None, "", f"{type(exc).__name__}: {reason}")


CheckOutcome = tuple[StepStatus, str] | tuple[StepStatus, str, tuple[str, ...]]
"""What a check returns: status, detail and, optionally, the names it could not verify."""


def run_step(name: str, check: Callable[[], CheckOutcome]) -> StepResult:
    """Run ``check`` and time it; an exception becomes a failed step naming it."""
    t0 = time.monotonic()
    unverified: tuple[str, ...] = ()
    try:
        outcome = check()
        status, detail = outcome[0], outcome[1]
        if len(outcome) == 3:
            unverified = outcome[2]
    except Exception as exc:  # a check must never take the verification down with it
        status, detail = StepStatus.FAILED, f"{type(exc).__name__}: {exc}"
    return StepResult(name, status, detail, time.monotonic() - t0, unverified)


def _healthy(base_url: str, path: str, api_key: str | None) -> tuple[StepStatus, str]:
    answer = http_get(base_url + path, api_key=api_key)
    if answer.status == 200:
        return StepStatus.PASSED, f"GET {path} -> 200"
    return StepStatus.FAILED, f"GET {path} -> {answer.error or answer.status}"


def list_models(base_url: str, *, api_key: str | None = None,
                timeout_s: float = 5.0) -> tuple[list[str] | None, str]:
    """The ids ``/v1/models`` lists, or ``None`` and why not."""
    answer = http_get(base_url.rstrip("/") + "/v1/models", timeout_s=timeout_s, api_key=api_key)
    if answer.status != 200:
        return None, f"GET /v1/models -> {answer.error or answer.status}"
    try:
        data = json.loads(answer.body).get("data")
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m], ""
    except (ValueError, AttributeError, TypeError):
        return None, "GET /v1/models did not return an OpenAI model list"


def _model(base_url: str, expected: str, api_key: str | None) -> tuple[StepStatus, str]:
    served, why = list_models(base_url, api_key=api_key)
    if served is None:
        return StepStatus.FAILED, why
    if expected in served:
        return StepStatus.PASSED, f"serves {expected!r}"
    return StepStatus.FAILED, f"expected model {expected!r}, server lists {served}"


def check_completion(
    base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 60.0
) -> tuple[StepStatus, str]:
    """One real streamed completion (``max_tokens`` 4); passes if >= 1 token came back."""
    config = ClientConfig(base_url=base_url, model=model, api_key=api_key,
                          request_timeout_s=timeout_s, run_id="tunegate-verify")
    spec = RequestSpec(index=0, prompt="Say hello.", max_tokens=4)

    async def one() -> Any:
        async with aiohttp.ClientSession() as session:
            return await send_request(session, spec, config)

    record = asyncio.run(one())
    tokens = record.output_tokens if record.output_tokens is not None else record.content_events
    if record.outcome is Outcome.COMPLETE and tokens >= 1:
        took_ms = (record.t_end_ns - record.t_send_ns) / 1e6
        return StepStatus.PASSED, f"{tokens} token(s) in {took_ms:.0f} ms"
    why = record.error or f"outcome {record.outcome.value}"
    return StepStatus.FAILED, f"completion returned {tokens} token(s): {why}"


def _metrics(base_url: str, path: str, prefix: str | None,
             api_key: str | None) -> tuple[StepStatus, str]:
    if prefix is None:
        return StepStatus.SKIPPED, "this engine exposes no Prometheus metrics"
    answer = http_get(base_url + path, api_key=api_key)
    if answer.status != 200:
        return StepStatus.FAILED, f"GET {path} -> {answer.error or answer.status}"
    samples = [ln for ln in answer.body.splitlines() if ln.startswith(prefix)]
    if samples:
        return StepStatus.PASSED, f"{len(samples)} sample(s) with prefix {prefix!r}"
    return StepStatus.FAILED, f"GET {path} shows no sample with prefix {prefix!r}"


@dataclass(frozen=True, slots=True)
class EngineArgsCheck:
    """What to compare after start: the engine's names for the values the config sets.

    Attributes:
        expected: Engine argument name (its ``dest``, e.g. ``tp_size``) -> the value the run
            records for it.
        paths: Endpoints that report the running arguments, tried in order (SGLang 0.5:
            ``/server_info``, older: ``/get_server_info``).
    """

    expected: Mapping[str, object]
    paths: tuple[str, ...]


def _same(want: object, got: object) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, int | float) and isinstance(got, int | float):
        return math.isclose(float(want), float(got), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, list | tuple) and isinstance(got, list | tuple):
        return len(want) == len(got) and all(_same(w, g) for w, g in zip(want, got,
                                                                          strict=True))
    return str(want) == str(got)


def check_engine_args(base_url: str, check: EngineArgsCheck, *, api_key: str | None = None
                      ) -> tuple[StepStatus, str, tuple[str, ...]]:
    """Compare the values the engine reports it runs with the ones the config records.

    Only the requested names are read from the answer (it may hold secrets); their values
    appear in the detail, so the journal records what the engine really ran.

    Returns:
        The status, the detail, and the names not verified: not reported by the engine, or
        all of them when its arguments could not be read. Passed means every parameter
        compared runs as recorded and at least one was compared; the detail then ends with
        ``not verified: x, y`` when some were not (see the module docstring).
    """
    everything = tuple(check.expected)
    tried = []
    for path in check.paths:
        answer = http_get(base_url + path, timeout_s=10.0, api_key=api_key)
        if answer.status == 200:
            break
        tried.append(f"GET {path} -> {answer.error or answer.status}")
    else:
        return StepStatus.SKIPPED, ("; ".join(tried) + ": the engine's running arguments were "
                                    "not read (not a pass)"), everything
    try:
        data = json.loads(answer.body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("server_args"), dict):
        data = data["server_args"]  # an older layout nests them
    if not isinstance(data, dict):
        return (StepStatus.SKIPPED, f"GET {path} did not return a JSON object (not a pass)",
                everything)
    differ, same, missing = [], [], []
    for name, want in check.expected.items():
        if name not in data:
            missing.append(name)
        elif _same(want, data[name]):
            same.append(f"{name}={data[name]!r}")
        else:
            differ.append(f"{name}: the config records {want!r}, the engine runs "
                          f"{data[name]!r}")
    unread = (f"; not verified: {', '.join(missing)} (GET {path} does not report them)"
              if missing else "")
    if differ:
        return StepStatus.FAILED, (
            "the engine decided other values than the config records (" + "; ".join(differ)
            + "): its numbers would be labelled with the wrong config; set these parameters "
            "to what the engine runs, or leave them out" + unread), tuple(missing)
    if not same:
        return (StepStatus.SKIPPED, f"GET {path} reports none of {', '.join(missing)}: not "
                "verified (not a pass)", tuple(missing))
    return StepStatus.PASSED, f"runs as recorded: {', '.join(same)}{unread}", tuple(missing)


def _memory(probe: AcceleratorProbe | None, min_mib: float) -> tuple[StepStatus, str]:
    if probe is None:
        return StepStatus.SKIPPED, "no accelerator expected for this server (configured)"
    reading = probe()
    if reading.skipped_reason is not None:
        return StepStatus.SKIPPED, reading.skipped_reason
    if reading.error is not None:
        return StepStatus.FAILED, reading.error
    used = max(reading.used_mib, default=0.0)
    shown = ", ".join(f"{m:.0f}" for m in reading.used_mib)
    if used >= min_mib:
        return StepStatus.PASSED, f"{reading.tool}: {shown} MiB used (>= {min_mib:g} MiB)"
    return StepStatus.FAILED, (f"{reading.tool}: {shown} MiB used, less than the "
                               f"{min_mib:g} MiB the weights need: were they loaded?")


def verify_server(
    base_url: str,
    model: str,
    *,
    adapter: str = "server",
    health_path: str = "/health",
    metrics_path: str = "/metrics",
    metric_prefix: str | None = None,
    api_key: str | None = None,
    accelerator: AcceleratorProbe | None = probe_accelerator_memory,
    min_memory_mib: float = 1024.0,
    completion_timeout_s: float = 60.0,
    extra_steps: Sequence[StepResult] = (),
    engine_args: EngineArgsCheck | None = None,
) -> VerificationReport:
    """Run every verification step against a started server.

    Args:
        base_url: ``http://HOST:PORT``.
        model: The name ``/v1/models`` must list and the completion uses.
        adapter: Adapter name, recorded in the report.
        health_path, metrics_path: Engine-specific paths.
        metric_prefix: Expected metric prefix; ``None`` skips the step (engine has none).
        api_key: Sent as a bearer token; never recorded.
        accelerator: Reads device memory; ``None`` skips the step (CPU server, simulator).
        min_memory_mib: Device memory in use that counts as "weights loaded".
        completion_timeout_s: Deadline of the self-check completion.
        extra_steps: Steps already taken (e.g. ``start``), placed first in the report.
        engine_args: The values to find in the engine's report of its running arguments
            (``None``: the engine reports none; the step is left out).
    """
    base = base_url.rstrip("/")
    report = VerificationReport(adapter, base, list(extra_steps))
    report.steps.append(run_step("healthy", lambda: _healthy(base, health_path, api_key)))
    report.steps.append(run_step("model", lambda: _model(base, model, api_key)))
    report.steps.append(run_step("completion", lambda: check_completion(
        base, model, api_key=api_key, timeout_s=completion_timeout_s)))
    report.steps.append(run_step("metrics", lambda: _metrics(base, metrics_path, metric_prefix,
                                                             api_key)))
    if engine_args is not None:
        check = engine_args
        report.steps.append(run_step("engine_args", lambda: check_engine_args(
            base, check, api_key=api_key)))
    report.steps.append(run_step("accelerator_memory", lambda: _memory(accelerator,
                                                                       min_memory_mib)))
    # Details quote what the server said (model ids, error bodies, engine arguments): a server
    # may echo the key it was sent, and the report goes to the journal and the console.
    report.steps = [replace(s, detail=mask_secrets(s.detail, [api_key])) for s in report.steps]
    return report

