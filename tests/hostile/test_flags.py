"""Absurd flags and hostile files through the real CLI (issue 13, item 4): one line naming the
flag (or file) and the value, the limit and why where there is one, and exit 2. Never a
traceback, an "internal error", a hang, or a server that serves something else.

One table per command; a new flag gets its bad cases by adding rows. ``cli.refuses`` (the
suite's ``conftest.py``) holds the contract: exit 2, one stderr line holding every fragment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main

pytestmark = pytest.mark.integration


BENCH = ["bench", "--sim", "fast", "--no-progress", "--quiet"]


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--num-requests", "999999999999"], ["--num-requests: at most 1,000,000",
                                              "kept in memory", "(got 999999999999)"]),
        (["--num-warmup", "999999999"], ["--num-warmup: at most 1,000,000"]),
        (["--input-tokens", "1000000000"], ["--input-tokens:", "exceeds the limit of 1,048,576 "
                                            "tokens per request"]),
        (["--output-tokens", "1000000000"], ["--output-tokens:", "1,048,576"]),
        (["--concurrency", "99999999"], ["--concurrency: at most 65,536 requests in flight",
                                         "TCP connection"]),
        (["--request-rate", "1e-300"], ["--request-rate: at least 0.001 requests/s"]),
        (["--request-rate", "1e300"], ["--request-rate: at most 1,000,000 requests/s",
                                       "use inf"]),
        (["--duration", "1e300"], ["--duration: at most 604,800 s (7 days)"]),
        (["--workers", "1000"], ["--workers: at most 64 client processes"]),
        (["--percentiles", "1e-300"], ["--percentiles:", "more than 4 decimal places"]),
        (["--percentiles", ",".join(str(p) for p in range(1, 31))],
         ["--percentiles: 30 percentiles, at most 20"]),
        (["--percentiles", "50,nan"], ["--percentiles: percentile nan is outside (0, 100)"]),
    ],
    ids=["num_requests", "num_warmup", "input_tokens", "output_tokens", "concurrency",
         "rate_tiny", "rate_huge", "duration", "workers", "percentile_digits",
         "percentile_count", "percentile_nan"],
)
def test_bench_refuses_absurd_sizes_naming_the_flag_the_limit_and_why(
    cli: Any, flags: list[str], fragments: list[str]
) -> None:
    cli.refuses(BENCH + flags, *fragments)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://[::1", "--url: is not a valid URL (Invalid IPv6 URL)"),
        ("http://[::1]:99999", "--url: is not a valid URL (Port out of range 0-65535)"),
        ("http://127.0.0.1:abc", "--url: is not a valid URL (Port could not be cast"),
        ("http://127.0.0.1:0", "--url: port 0 cannot be connected to"),
    ],
    ids=["ipv6_unclosed", "ipv6_port_range", "port_not_a_number", "port_zero"],
)
def test_bench_refuses_a_malformed_url_in_one_line(cli: Any, url: str, fragment: str) -> None:
    cli.refuses(["bench", "--no-progress", "--url", url], fragment)


@pytest.mark.parametrize(
    ("name", "data", "fragment"),
    [
        ("nested.jsonl", b'{"prompt": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
         ":1: JSON nested deeper than can be read"),
        ("bigint.jsonl", b'{"prompt": "a", "max_tokens": ' + b"9" * 5000 + b"}\n",
         ":1: unreadable JSON"),
        ("huge.jsonl", b'{"prompt": "a", "max_tokens": 10000000000}\n',
         "field 'max_tokens' is 10000000000, above the limit of 1,048,576"),
        ("latin1.jsonl", b'{"prompt": "caf\xe9"}\n', "not UTF-8 text"),
    ],
    ids=["nested", "huge_integer", "max_tokens_over_limit", "not_utf8"],
)
def test_bench_refuses_a_hostile_jsonl_dataset_naming_the_file(
    cli: Any, tmp_path: Path, name: str, data: bytes, fragment: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    cli.refuses([*BENCH, "--dataset", "jsonl", "--dataset-path", str(path),
                     "--num-requests", "1"], str(path), fragment)


def test_bench_refuses_a_fifo_dataset_instead_of_hanging(cli: Any,
                                                         tmp_path: Path) -> None:
    fifo = tmp_path / "prompts.fifo"
    os.mkfifo(fifo)
    cli.refuses([*BENCH, "--dataset", "sharegpt", "--dataset-path", str(fifo),
                     "--output-tokens", "8", "--num-requests", "1"], "not a regular file")


ADDRESSES = [
    (["--port", "70000"], "--port 70000: out of range"),
    (["--port", "-1"], "--port -1: out of range"),
    (["--host", "http://[::1"], "--host 'http://[::1': a host name or address, not a URL"),
    (["--host", "[::1"], "--host '[::1': malformed IPv6 address"),
    (["--host", "no.such.host.invalid"], "--host 'no.such.host.invalid': cannot be resolved"),
]
ADDRESS_IDS = ["port_high", "port_negative", "url_as_host", "ipv6_unclosed", "unresolvable"]


@pytest.mark.parametrize(("flags", "fragment"), ADDRESSES, ids=ADDRESS_IDS)
def test_loopback_refuses_a_bad_listen_address_before_listening(
    cli: Any, flags: list[str], fragment: str
) -> None:
    cli.refuses(["loopback", *flags], fragment)


@pytest.mark.parametrize(("flags", "fragment"), ADDRESSES, ids=ADDRESS_IDS)
def test_sim_serve_refuses_a_bad_listen_address_before_its_simulated_start(
    cli: Any, flags: list[str], fragment: str
) -> None:
    cli.refuses(["sim", "serve", "--scenario", "fast", *flags], fragment)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--tokens-per-event", "0"], "--tokens-per-event 0: each event carries at least one"),
        (["--ttft-ms", "-5"], "--ttft-ms -5.0: a delay must be a finite number of ms"),
        (["--itl-ms", "nan"], "--itl-ms nan: a delay must be a finite number"),
        (["--itl-ms", "1e300"], "--itl-ms 1e+300: a delay must be a finite number of ms from 0 "
         "to 86,400,000 (one day)"),
        (["--tokens", "-3"], "--tokens -3: must be an integer >= 0"),
        (["--http-error-every", "0"], "--http-error-every 0: every N-th request fails"),
        (["--truncate-after", "-1"], "--truncate-after -1: must be an integer >= 0"),
        (["--reasoning-tokens", "-1"], "--reasoning-tokens -1"),
    ],
    ids=["tokens_per_event_zero", "negative_ttft", "nan_itl", "huge_itl", "negative_tokens",
         "http_error_every_zero", "negative_truncate", "negative_reasoning"],
)
def test_loopback_refuses_a_programme_it_cannot_serve(
    cli: Any, flags: list[str], fragment: str
) -> None:
    cli.refuses(["loopback", "--port", "0", *flags], fragment)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--sigma", "0.02", "--effect", "1e-300"], "--effect 1e-300 under sigma 0.02 needs more "
         "than 100,000 repeats per arm"),
        (["--sigma", "0.02", "--effect", "1e-300", "--budget", "5"], "--effect 1e-300"),
        (["--sigma", "1e300", "--effect", "0.03"], "--sigma must be a relative noise in (0, 10]"),
        (["--sigma", "1e300", "--effect", "0.03", "--gate"], "--sigma"),
        (["--sigma", "0.02", "--effect", "1e300", "--gate"], "--effect must be a non-zero "
         "relative effect of at most 100"),
        (["--sigma", "0.02", "--effect", "0.03", "--alpha", "1e-300"], "--alpha must lie in "
         "[1e-10, 1)"),
        (["--sigma", "0.02", "--effect", "0.03", "--power", "1e-300"], "--power must lie above "
         "alpha"),
        (["--sigma", "0.02", "--effect", "0.03", "--budget", "999999999999"], "--budget must be "
         "from 2 to 100,000"),
        (["--sigma", "0.02", "--effect", "1e-9", "--method", "t"], "needs more than 100,000"),
        (["--sigma", "0.02", "--effect", "0.03", "--gate", "--noise-repeats", "999999999999"],
         "--noise-repeats must be from 2 to 100,000"),
    ],
    ids=["tiny_effect", "tiny_effect_budget", "huge_sigma", "huge_sigma_gate", "huge_effect_gate",
         "tiny_alpha", "tiny_power", "huge_budget", "tiny_effect_t", "huge_noise_repeats"],
)
def test_stats_power_refuses_extreme_values_in_one_line(
    cli: Any, flags: list[str], fragment: str
) -> None:
    cli.refuses(["stats", "power", *flags], fragment)


def test_stats_power_t_method_stays_finite_where_the_noncentral_t_series_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # SciPy's noncentral t gives NaN at this budget's noncentrality; the power is near 1.
    assert main(["stats", "power", "--sigma", "0.02", "--effect", "0.03", "--method", "t",
                 "--budget", "100000", "--power", "0.9999999999", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"power_at_budget": 1.0' in out or '"power_at_budget": 0.99' in out
