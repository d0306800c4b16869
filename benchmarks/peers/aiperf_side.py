"""Run the peer tool AIPerf from a side venv and read back its summary export.

AIPerf (PyPI ``aiperf``, NVIDIA) is never installed into tunegate's own venv: its dependency
tree (transformers, datasets, pandas, textual, ...) is large and pins things we do not want.
It lives in a side venv, by default ``~/.cache/tunegate/aiperf-venv``, and is driven as a
subprocess with an argv list.

Facts this module relies on, checked against AIPerf 0.13.0:

* ``profile_export_aiperf.json`` holds one block per metric tag, e.g.
  ``"time_to_first_token": {"unit": "ms", "avg": ..., "p50": ..., "p99": ..., "count": N}``.
  AIPerf measures in nanoseconds internally and exports in the metric's *display* unit, which
  is ``"ms"`` for ``time_to_first_token``, ``inter_token_latency`` and ``request_latency``.
  Verified on the fixtures: for the non-streamed answers in ``ignore_stream`` the per-request
  ``(request_end_ns - request_start_ns) / 1e6`` in ``profile_export.jsonl`` equals
  ``request_latency.value`` (ms) exactly; when streaming it is up to ~3 ms larger, because
  AIPerf's request latency ends at the last *content* chunk (before the usage chunk and
  ``[DONE]``).  Against the 400 ms / 20 ms stub the summary reads TTFT ~404, ITL ~20.04.
  The unit string is still read and converted (ns/us/ms/s) rather than assumed.
* ``request_count`` is a scalar block ``{"unit": "requests", "avg": N}``.
* TTFT and ITL blocks are absent when the run was not streaming (AIPerf flags them
  streaming-only).  If the server ignores ``"stream": true`` and answers one JSON body, AIPerf
  reports TTFT == request latency and ITL == 0 for every request, exits 0 and warns about
  nothing (see ``tests/fixtures/aiperf/ignore_stream``).
* With ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` set, AIPerf 0.13.0 sends a local tokenizer
  *directory* through ``huggingface_hub.snapshot_download`` and fails with
  ``HFValidationError`` (upstream ai-dynamo/aiperf PR #1339).  Without those variables a
  local directory is loaded straight from disk, so :func:`run_aiperf` removes them and instead
  points ``HF_ENDPOINT`` at a closed loopback port: any Hub access fails fast, nothing leaves
  the machine.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

AIPERF_VENV = Path.home() / ".cache" / "tunegate" / "aiperf-venv"
AIPERF_VERSION = "0.13.0"
EXPORT_JSON = "profile_export_aiperf.json"
EXPORT_JSONL = "profile_export.jsonl"

#: Closed loopback port used as ``HF_ENDPOINT`` so an accidental Hub lookup fails at once.
_DEAD_HF_ENDPOINT = "http://127.0.0.1:9"
_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}
_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
#: Word vocabulary of the stand-in tokenizer; " tok" (the stub server's token) is one token.
_WORD_TEXT = (
    "tok the and of to a in that is it you for he with his be not by on as this but have "
    "from or my all what so are me no thy thee thou i love will do at her him shall your "
    "which she they we our when if one more than time then there how yet was"
)
_WORDS = tuple(_WORD_TEXT.split())


class AiperfError(RuntimeError):
    """AIPerf could not be run, failed, or left no readable export."""


@dataclass(frozen=True)
class AiperfSummary:
    """Headline numbers of one AIPerf run, all latencies in milliseconds.

    ``ttft_*`` and ``itl_*`` are None when AIPerf exported no such metric (non-streaming run).
    ``itl`` is AIPerf's ``inter_token_latency``: per request
    ``(request_latency - ttft) / (output_tokens - 1)``, i.e. what vLLM's bench calls TPOT.
    """

    ttft_ms_mean: float | None
    ttft_ms_median: float | None
    ttft_ms_p99: float | None
    itl_ms_mean: float | None
    itl_ms_median: float | None
    itl_ms_p99: float | None
    latency_ms_mean: float
    latency_ms_median: float
    latency_ms_p99: float
    request_count: int
    output_tokens_mean: float | None
    aiperf_version: str
    export_path: Path


def _venv_bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def _installed_version(venv: Path) -> str | None:
    """Version of aiperf in ``venv`` from its dist-info folder (no interpreter start)."""
    dists = sorted(venv.glob("lib/python*/site-packages/aiperf-*.dist-info"))
    return dists[0].name[len("aiperf-") : -len(".dist-info")] if dists else None


def ensure_aiperf(
    venv: Path = AIPERF_VENV, version: str = AIPERF_VERSION, install: bool = False
) -> Path | None:
    """Return the ``aiperf`` executable of the side venv, or None when it is not available.

    With ``install=True`` a missing venv is created with ``python -m venv`` and
    ``aiperf==version`` is pip-installed into it (about a minute on a warm PyPI connection);
    tunegate's own venv is never touched.  Never raises for a missing or failed install.
    """
    exe = _venv_bin(venv, "aiperf")
    if exe.is_file() and _installed_version(venv) == version:
        return exe
    if not install:
        return None
    python = _venv_bin(venv, "python")
    try:
        if not python.is_file():
            venv.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [sys.executable, "-m", "venv", str(venv)],
                check=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
                capture_output=True,
            )
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", f"aiperf=={version}"],
            check=True,
            timeout=1800,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if exe.is_file() and _installed_version(venv) == version:
        return exe
    return None


def write_tokenizer_dir(path: Path) -> Path:
    """Write the smallest HuggingFace tokenizer directory AIPerf loads offline; return ``path``.

    A lower-casing, whitespace-splitting WordLevel model over a few dozen words (anything else
    is ``<unk>``), saved as ``tokenizer.json`` + ``tokenizer_config.json`` +
    ``special_tokens_map.json`` so ``transformers.AutoTokenizer.from_pretrained(path)`` accepts
    it with no network.  One whitespace-separated word is one token, so the stub server's
    ``" tok"`` chunks count one token each and AIPerf's token counts match a word count.
    Written as plain JSON: needs neither ``tokenizers`` nor ``transformers`` on this side.
    """
    path.mkdir(parents=True, exist_ok=True)
    vocab = {token: i for i, token in enumerate((*_SPECIAL_TOKENS, *_WORDS))}
    added = [
        {
            "id": i,
            "content": token,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, token in enumerate(_SPECIAL_TOKENS)
    ]
    tokenizer: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    specials = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1_000_000,
        "clean_up_tokenization_spaces": False,
        **specials,
    }
    files = {
        "tokenizer.json": tokenizer,
        "tokenizer_config.json": config,
        "special_tokens_map.json": specials,
    }
    for name, content in files.items():
        (path / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    return path


def _loopback_base_url(url: str) -> str:
    """``scheme://host:port`` of a loopback URL; raise ValueError for anything else.

    AIPerf appends ``/v1/completions`` itself, so a path other than ``""``, ``/`` or ``/v1``
    is rejected rather than silently doubled.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    host = parts.hostname
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"AIPerf is only run against loopback servers, not {host!r}")
    if parts.path.rstrip("/") not in ("", "/v1"):
        raise ValueError(f"give the server's base URL, without an endpoint path: {url!r}")
    return f"{parts.scheme}://{parts.netloc}"


def aiperf_argv(
    aiperf: Path,
    *,
    url: str,
    model: str,
    concurrency: int,
    num_requests: int,
    input_tokens: int,
    output_tokens: int,
    artifact_dir: Path,
    tokenizer_dir: Path,
    request_timeout_s: float,
    ignore_eos: bool = True,
    seed: int = 0,
    output_tokens_stddev: float = 0.0,
) -> list[str]:
    """The ``aiperf profile`` argv :func:`run_aiperf` uses (streaming completions, no UI)."""
    if min(concurrency, num_requests, input_tokens, output_tokens) < 1:
        raise ValueError("concurrency, num_requests and token lengths must be >= 1")
    argv = [
        str(aiperf),
        "profile",
        "--model", model,
        "--url", _loopback_base_url(url),
        "--endpoint-type", "completions",
        "--streaming",
        "--concurrency", str(concurrency),
        "--request-count", str(num_requests),
        "--isl", str(input_tokens),
        "--isl-stddev", "0",
        "--osl", str(output_tokens),
        "--osl-stddev", f"{output_tokens_stddev:g}",
        "--tokenizer", str(tokenizer_dir),
        "--artifact-dir", str(artifact_dir),
        "--request-timeout-seconds", f"{request_timeout_s:g}",
        "--random-seed", str(seed),
        "--ui-type", "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
    ]  # fmt: skip
    if ignore_eos:
        # Without it AIPerf only sets max_tokens; a real server may stop early at EOS.
        argv += ["--extra-inputs", "ignore_eos:true"]
    return argv


def _aiperf_env(tmpdir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env.update(
        HF_ENDPOINT=_DEAD_HF_ENDPOINT,
        HF_HUB_DISABLE_TELEMETRY="1",
        TMPDIR=str(tmpdir),  # AIPerf leaves aiperf_mmap_<id>/ dirs in the temp dir
        NO_COLOR="1",
        COLUMNS="160",
        PYTHONUNBUFFERED="1",
    )
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the process group this module started for AIPerf (it forks many services)."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_aiperf(
    aiperf: Path,
    *,
    url: str,
    model: str,
    concurrency: int,
    num_requests: int,
    input_tokens: int,
    output_tokens: int,
    artifact_dir: Path,
    tokenizer_dir: Path,
    timeout_s: float,
    ignore_eos: bool = True,
    output_tokens_stddev: float = 0.0,
) -> AiperfSummary:
    """Run ``aiperf profile`` (streaming, completions endpoint) and parse its summary export.

    ``url`` must be a loopback base URL.  AIPerf's console output goes to
    ``artifact_dir/aiperf_console.log``.  The whole run is bounded by ``timeout_s``; on expiry
    AIPerf's process group is terminated and AiperfError raised.  Also raises AiperfError when
    AIPerf exits non-zero or writes no export.
    """
    artifact_dir.mkdir(parents=True, exist_ok=True)
    argv = aiperf_argv(
        aiperf,
        url=url,
        model=model,
        concurrency=concurrency,
        num_requests=num_requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        artifact_dir=artifact_dir,
        tokenizer_dir=tokenizer_dir,
        request_timeout_s=max(1.0, timeout_s),
        ignore_eos=ignore_eos,
        output_tokens_stddev=output_tokens_stddev,
    )
    console = artifact_dir / "aiperf_console.log"
    tmpdir = Path(tempfile.mkdtemp(prefix="tunegate-aiperf-"))
    try:
        with console.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_aiperf_env(tmpdir),
                start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise AiperfError(f"aiperf ran past {timeout_s:g} s; see {console}") from None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if rc != 0:
        tail = console.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise AiperfError(f"aiperf exited {rc}; see {console}:\n{tail}")
    return parse_export(artifact_dir / EXPORT_JSON)


def _stat_ms(block: dict[str, Any] | None, stat: str) -> float | None:
    if block is None or block.get(stat) is None:
        return None
    unit = str(block.get("unit", ""))
    if unit not in _TO_MS:
        raise AiperfError(f"unexpected time unit {unit!r} in AIPerf export")
    return float(block[stat]) * _TO_MS[unit]


def parse_export(path: Path) -> AiperfSummary:
    """Read an AIPerf ``profile_export_aiperf.json`` (schema 1.x) into an AiperfSummary."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AiperfError(f"cannot read AIPerf export {path}: {exc}") from exc
    latency = data.get("request_latency")
    if not isinstance(latency, dict):
        raise AiperfError(f"{path} has no request_latency block")
    ttft = data.get("time_to_first_token")
    itl = data.get("inter_token_latency")
    count_block = data.get("request_count") or {}
    count = count_block.get("avg", latency.get("count"))
    osl = data.get("output_sequence_length") or {}

    def required(stat: str) -> float:
        value = _stat_ms(latency, stat)
        if value is None:
            raise AiperfError(f"{path}: request_latency has no {stat!r}")
        return value

    return AiperfSummary(
        ttft_ms_mean=_stat_ms(ttft, "avg"),
        ttft_ms_median=_stat_ms(ttft, "p50"),
        ttft_ms_p99=_stat_ms(ttft, "p99"),
        itl_ms_mean=_stat_ms(itl, "avg"),
        itl_ms_median=_stat_ms(itl, "p50"),
        itl_ms_p99=_stat_ms(itl, "p99"),
        latency_ms_mean=required("avg"),
        latency_ms_median=required("p50"),
        latency_ms_p99=required("p99"),
        request_count=int(count) if count is not None else 0,
        output_tokens_mean=float(osl["avg"]) if osl.get("avg") is not None else None,
        aiperf_version=str(data.get("aiperf_version", "")),
        export_path=path,
    )
