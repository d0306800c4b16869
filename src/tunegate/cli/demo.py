"""``tunegate demo``: the seed article's first lesson, run end to end on this machine.

Part 1 replays the article on the embedded simulator's ``seed`` scenario, in virtual time, with
the article's workload (1319 requests, concurrency 16):

  (a) stream=false, chunked prefill off: the article's report. TTFT == E2EL; validation
      rejects it before anyone reads a TTFT figure.
  (b) streaming, chunked prefill on: the article's fix.
  (c) streaming, chunked prefill off: the control run the article never made. It shows that
      the TTFT drop from (a) to (b) is the gauge repair, not the engine change.

Part 2 runs over real sockets: the simulator served over HTTP in its own process, and a
loopback server that ignores stream=true, which validation still catches.

Part 3 runs ``tunegate tune`` on the same scenario: the gauge is fixed first, VALIDATE finds the
prefill pathology, chunked prefill is kept with the gate's evidence, and only then is the
headroom in concurrency and memory explored. The run directory is ``OUT_DIR/tune``.

Part 4 runs ``tunegate attribute`` on that run: the control experiment of part 1, made by the
tool for any tuning result, with repeats, intervals and the gate's verdicts: the gauge repair is
a change of measurement, chunked prefill an engine change.

The demo ends by naming the tuning run's HTML report, ``OUT_DIR/tune/report.html``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from tunegate.cli.console import console, print_validation

__all__ = ["run"]



def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tunegate demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, default=Path("demo-out"))
    parser.add_argument("--budget", type=int, default=8, help="tuning proposals in part 3")
    return parser


def _row(table: Table, name: str, doc: dict[str, Any], valid: bool) -> None:
    invalid = set(doc["validation"]["invalid_metrics"])

    def cell(metric: str, key: str, digits: int = 1) -> str:
        value = doc.get(key)
        text = "-" if value is None else f"{value:,.{digits}f}"
        return f"[red strike]{text}[/]" if metric in invalid else text

    verdict = "[green]valid[/]" if valid else "[bold red]INVALID[/]"
    table.add_row(name, cell("ttft", "mean_ttft_ms", 0), cell("e2el", "mean_e2el_ms", 0),
                  cell("prefill", "mean_prefill_tok_s", 2),
                  cell("generation", "mean_generation_tok_s", 2),
                  cell("throughput", "output_throughput"), verdict)


def _table() -> Table:
    table = Table()
    for column in ("run", "TTFT ms", "E2EL ms", "prefill/s", "gen./s", "out tok/s", "gauge"):
        table.add_column(column, justify="left" if column in ("run", "gauge") else "right")
    return table


def run(argv: Sequence[str]) -> int:
    from tunegate.api import BenchOptions, TargetOptions, bench
    from tunegate.cli.report import report_after
    from tunegate.results import write_json
    from tunegate.servers.loopback import Behaviour
    from tunegate.servers.loopback.background import serve_in_process
    from tunegate.servers.simulator.serve import serve_in_process as sim_in_process
    from tunegate.workload import WorkloadConfig

    args = _parser().parse_args(list(argv))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    verdicts: list[tuple[str, bool, bool]] = []  # name, valid, expected

    def record(name: str, result: Any, expected: bool) -> dict[str, Any]:
        document: dict[str, Any] = result.to_json()
        write_json(args.out_dir / f"{name}.json", document, label="--out-dir")
        verdicts.append((name, result.validation.valid, expected))
        return document

    console.rule("[bold]Part 1: the seed article on the simulator (virtual time)[/]")
    seed = WorkloadConfig.model_validate({"dataset": "seed"})
    console.print("Scenario seed, 1319 requests at concurrency 16. The article reported "
                  "(a) TTFT = E2EL = 9557.6 ms, prefill 7.07, 'decode' 16.78 tok/s; "
                  "(b) TTFT ~1.1 s, E2EL 8.96 s, prefill 70.35, 'decode' 18.36 tok/s.")
    article = _table()
    runs = [("a-no-stream-chunked-off", "(a) no stream, chunked off", False, False, False),
            ("b-stream-chunked-on", "(b) stream, chunked on", True, True, True),
            ("c-stream-chunked-off", "(c) stream, chunked off", True, False, True)]
    docs: dict[str, dict[str, Any]] = {}
    first_findings = None
    for name, label, stream, chunked, expected in runs:
        options = BenchOptions(target=TargetOptions(stream=stream), workload=seed, sim="seed",
                               engine_args={"enable_chunked_prefill": str(chunked).lower()})
        result = bench(options)
        docs[label[:3]] = record(name, result, expected)
        _row(article, label, docs[label[:3]], result.validation.valid)
        first_findings = first_findings or result.validation
    console.print(article)
    if first_findings is not None:
        console.print("What the gauge said about (a):")
        print_validation(first_findings)
    a, b, c = docs["(a)"], docs["(b)"], docs["(c)"]

    def change(new: float, old: float) -> str:
        return f"{(new / old - 1):+.1%}"

    console.print(
        f"(c) runs (a)'s engine with (b)'s gauge. TTFT (a) -> (c): "
        f"{change(c['mean_ttft_ms'], a['mean_ttft_ms'])} with the engine unchanged: that is "
        f"the gauge repair. (c) -> (b), chunked prefill alone: E2EL "
        f"{change(b['mean_e2el_ms'], c['mean_e2el_ms'])}, output throughput "
        f"{change(b['output_throughput'], c['output_throughput'])}.\n")

    console.rule("[bold]Part 2: real sockets[/]")
    console.print("64 requests at concurrency 16, over loopback HTTP unless said otherwise.")
    sockets = _table()
    small = WorkloadConfig.model_validate({"dataset": "synthetic", "num_requests": 64,
                                           "input_tokens": "lognormal:128,0.5",
                                           "output_tokens": "64", "concurrency": 16})
    with sim_in_process("fast") as url:
        result = bench(BenchOptions(target=TargetOptions(url=url), workload=small))
    _row(sockets, "simulator, HTTP", record("http-simulator", result, True),
         result.validation.valid)
    virtual = bench(BenchOptions(workload=small, sim="fast"))
    _row(sockets, "simulator, virtual", record("virtual-simulator", virtual, True),
         virtual.validation.valid)
    deaf = Behaviour(ttft_ms=200, itl_ms=10, ignore_stream=True)
    with serve_in_process(deaf) as url:
        ignored = bench(BenchOptions(target=TargetOptions(url=url, endpoint="chat"),
                                     workload=small))
    _row(sockets, "ignores stream=true", record("server-ignores-stream", ignored, False),
         ignored.validation.valid)
    console.print(sockets)
    print_validation(ignored.validation)

    console.rule("[bold]Part 3: tunegate tune on the seed scenario[/]")
    tuned = _tune(args.out_dir / "tune", args.budget)

    console.rule("[bold]Part 4: tunegate attribute: which change did what[/]")
    attributed = tuned and _attribute(args.out_dir / "tune", c, a, b)

    console.rule("[bold]verdict[/]")
    ok = tuned and attributed
    for name, valid, expected in verdicts:
        ok &= valid == expected
        console.print(f"  {name}: {'valid' if valid else 'INVALID (stopped before analysis)'}")
    console.print(f"results in {args.out_dir}/ (tuning run: {args.out_dir / 'tune'}); the "
                  "tuning run is in the knowledge base: tunegate kb list")
    page = report_after(args.out_dir / "tune") if tuned else None
    if page is not None:
        console.print(f"the tuning run's report, one page to open in a browser: {page}",
                      soft_wrap=True, markup=False, highlight=False)  # the path on one line
    return 0 if ok and page is not None else 1


def _tune(run_dir: Path, budget: int) -> bool:
    """Run the default tuning story; true when it ended normally with a kept change."""
    import shutil

    from tunegate.tuner.driver import Tuner
    from tunegate.tuner.seed_story import default_config

    shutil.rmtree(run_dir, ignore_errors=True)
    config = default_config()
    # Recorded in the knowledge base (``tunegate kb list``), never warm-started from an earlier
    # demo: the demo shows the same story every time it runs.
    config = config.model_copy(update={
        "run": config.run.model_copy(update={"budget": budget}),
        "knowledge": config.knowledge.model_copy(update={"warm_start": False})})
    with console.status("tuning", spinner="dots") as status:
        def progress(rs: Any) -> None:
            status.update(f"{rs.state.value}: trial {rs.trials}/{budget}, "
                          f"{rs.measurements} measurements")

        rs = Tuner(config, run_dir, say=console.print, on_transition=progress).run()
    console.print(f"tuning ended {rs.state.value}: kept trial {rs.kept_trial}; see "
                  f"{run_dir / 'report.md'}")
    return rs.state.value in ("budget_exhausted", "converged") and bool(rs.kept_trial)


def _attribute(run_dir: Path, control: dict[str, Any], article: dict[str, Any],
               fixed: dict[str, Any]) -> bool:
    """Attribute the tuning run's kept config; true when the gauge and the engine change came
    out as such."""
    from tunegate.cli.attribute import attribution_table
    from tunegate.cli.tune import config_from_journal
    from tunegate.tuner.attribute_run import attribute_run

    with console.status("attributing", spinner="dots"):
        result = attribute_run(config_from_journal(run_dir), run_dir)
    console.print(attribution_table(result))
    kinds = {c["name"]: (c["kind"], c["metrics"].get("mean_ttft_ms") or {})
             for c in result["changes"]}
    gauge, chunked = kinds.get("benchmark.stream"), kinds.get("enable_chunked_prefill")

    def said(entry: tuple[str, dict[str, Any]] | None) -> str:
        effect = (entry or ("", {}))[1].get("effect")
        return "-" if effect is None else f"{effect:+.1%}"

    console.print(
        f"Mean TTFT, the control run of part 1 against the tool's experiment: gauge repair "
        f"{control['mean_ttft_ms'] / article['mean_ttft_ms'] - 1:+.1%} vs {said(gauge)}, "
        f"chunked prefill {fixed['mean_ttft_ms'] / control['mean_ttft_ms'] - 1:+.1%} vs "
        f"{said(chunked)}. Only the second is a gain: the first changed what TTFT means.")
    return (gauge is not None and gauge[0] == "gauge" and chunked is not None
            and chunked[0] == "engine")
