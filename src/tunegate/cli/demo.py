"""``tunegate demo``: the seed article's first lesson, run end to end on this machine.

Three benchmarks against a loopback server that tunegate starts itself (programmed: first token
after 200 ms, then one token every 10 ms):

1. ``stream=false``: the broken gauge. TTFT == E2EL on every request; validation rejects it.
2. Streaming: the repaired gauge; TTFT and ITL match what the server was programmed to do.
3. A server that ignores ``stream=true``: the client asked correctly, the data is still broken,
   and validation still catches it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from tunegate.cli.console import console, print_summary, print_validation

__all__ = ["run"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tunegate demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, default=Path("demo-out"))
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    return parser


def run(argv: Sequence[str]) -> int:
    from tunegate.api import BenchOptions, TargetOptions, bench
    from tunegate.results import write_json
    from tunegate.servers.loopback import Behaviour
    from tunegate.servers.loopback.background import serve_in_process
    from tunegate.workload import WorkloadConfig

    args = _parser().parse_args(list(argv))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    workload = WorkloadConfig.model_validate({
        "dataset": "synthetic", "num_requests": args.num_requests, "seed": 0,
        "input_tokens": "lognormal:63,0.4", "output_tokens": "fixed:64",
        "concurrency": args.concurrency,
    })
    steps = [
        ("1-no-stream", "stream=false: the broken gauge of the seed article",
         Behaviour(ttft_ms=200, itl_ms=10), False),
        ("2-stream", "stream=true: the repaired gauge (programmed TTFT 200 ms, ITL 10 ms)",
         Behaviour.adversarial(ttft_ms=200, itl_ms=10), True),
        ("3-server-ignores-stream", "stream=true, but the server answers with one JSON body",
         Behaviour(ttft_ms=200, itl_ms=10, ignore_stream=True), True),
    ]
    verdicts: list[tuple[str, bool]] = []
    for name, title, behaviour, stream in steps:
        console.rule(f"[bold]{name}[/]: {title}")
        with serve_in_process(behaviour) as url:
            options = BenchOptions(
                target=TargetOptions(url=url, stream=stream, endpoint="chat"), workload=workload,
            )
            result = bench(options)
        document = result.to_json()
        write_json(args.out_dir / f"{name}.json", document)
        print_summary(document, result.validation.invalid_metrics)
        print_validation(result.validation)
        verdicts.append((name, result.validation.valid))
    console.rule("[bold]verdict[/]")
    for name, valid in verdicts:
        console.print(f"  {name}: {'valid' if valid else 'INVALID (rejected before analysis)'}")
    console.print(f"results in {args.out_dir}/")
    expected = [False, True, False]
    return 0 if [v for _, v in verdicts] == expected else 1
