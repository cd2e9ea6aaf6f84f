"""The long differential fuzz run: dynacap (and torch's Dynamo) against eager on generated programs.

    python benchmarks/fuzz.py --n 5000 --compare-dynamo [--seed S] [--jobs 2]
    python benchmarks/fuzz.py --minimize SEED [--engine dynacap] [--seed-size 5]
    python benchmarks/fuzz.py --show SEED
    python benchmarks/fuzz.py --report RESULTS.jsonl   # the tables of a run kept with --results

The run prints, per failure class, how many of the programs each engine got
wrong, side by side, the first failing seeds per class, and programs per
second; then what each engine compiled: graphs and graph breaks per program
(over all calls, recompiles included; dynacap's from its capture record,
Dynamo's from a counting backend and its ``graph_break`` counters), the share
of programs with a break, and the most frequent break reasons
(``--by-production``: breaks per program among the programs that use each
production).  Seeds ``S .. S+n-1`` are the programs (``tests/fuzz/grammar.py``),
each run eagerly and under every engine in child processes
(``tests/fuzz/batch.py``), three calls each with changed inputs.  Both
engines use ``backend="eager"`` unless ``--backend`` says otherwise.
``--results FILE`` writes each program's result as a JSON line when it
arrives, so that the tables of a long run can be printed while it goes or
after it was stopped (``--report FILE``).  ``--minimize SEED`` reruns one program, shrinks it while the same failure
class reproduces and prints the small program with the eager and captured
outcomes.  Exit status 1 when dynacap got any program wrong.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(_ROOT, "tests"), _ROOT]

from fuzz.batch import Item, Result, run_batch  # noqa: E402
from fuzz.classify import CLASSES, FAILURES  # noqa: E402
from fuzz.grammar import GRAMMARS, exclusions_for, generate, production_names  # noqa: E402
from fuzz.inputs import CALLS  # noqa: E402


def _table(results, engines, n: int) -> str:
    counts = {e: {c: 0 for c in CLASSES + ("invalid",)} for e in engines}
    for r in results:
        counts[r.engine][r.cls] += 1
    width = max(12, *(len(e) for e in engines))
    lines = [f"{'class':<18}" + "".join(f"{e:>{width}}" for e in engines)]
    for cls in CLASSES + ("invalid",):
        if cls == "invalid" and not any(counts[e]["invalid"] for e in engines):
            continue
        lines.append(f"{cls:<18}" + "".join(f"{counts[e][cls]:>{width}}" for e in engines))
    lines.append(f"{'programs':<18}" + "".join(f"{n:>{width}}" for _ in engines))
    return "\n".join(lines)


def _first_failures(results, engines, limit: int = 8) -> str:
    lines = []
    for engine in engines:
        for cls in FAILURES + ("invalid",):
            seeds = [r for r in results if r.engine == engine and r.cls == cls]
            if seeds:
                lines.append(f"{engine} {cls}: seeds " + ", ".join(str(r.seed) for r in seeds[:limit])
                             + (" ..." if len(seeds) > limit else ""))
                detail = " ".join(seeds[0].detail.split())
                lines.append(f"    e.g. seed {seeds[0].seed}: {detail[:300]}")
    return "\n".join(lines)


def _compiled(results, engines) -> str:
    """Graphs and breaks per program for each engine, over the programs it ran to the end."""
    width = max(14, *(len(e) for e in engines))
    counted = {e: [r for r in results if r.engine == e and r.breaks is not None] for e in engines}
    rows = [("programs counted", lambda rs: f"{len(rs)}"),
            ("graphs/program", lambda rs: f"{sum(r.graphs for r in rs) / max(len(rs), 1):.3f}"),
            ("breaks/program", lambda rs: f"{sum(r.breaks for r in rs) / max(len(rs), 1):.3f}"),
            ("with a break", lambda rs: f"{100 * sum(1 for r in rs if r.breaks) / max(len(rs), 1):.1f}%")]
    lines = [f"{'compiled':<18}" + "".join(f"{e:>{width}}" for e in engines)]
    lines += [f"{label:<18}" + "".join(f"{cell(counted[e]):>{width}}" for e in engines) for label, cell in rows]
    for engine in engines:
        tally = Counter(reason for r in counted[engine] for reason in r.break_reasons)
        if tally:
            lines.append(f"{engine}: most frequent break reasons (of {sum(tally.values())})")
            lines += [f"  {n:>6}  {reason}" for reason, n in tally.most_common(10)]
    return "\n".join(lines)


def _by_production(results, engines) -> str:
    """Breaks per program among the programs that use each production (a program uses several)."""
    width = max(14, *(len(e) for e in engines))
    lines = [f"{'production':<22}{'programs':>9}" + "".join(f"{e:>{width}}" for e in engines)]
    programs = {r.seed: r.features for r in results if r.engine == engines[0]}
    for production in sorted({f for features in programs.values() for f in features}):
        seeds = {s for s, features in programs.items() if production in features}
        cells = []
        for engine in engines:
            rs = [r for r in results if r.engine == engine and r.seed in seeds and r.breaks is not None]
            cells.append(f"{sum(r.breaks for r in rs) / max(len(rs), 1):.2f}")
        lines.append(f"{production:<22}{len(seeds):>9}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def run(args) -> int:
    engines = [f"dynacap:{args.backend}"] + ([f"dynacap+print:{args.backend}"] if args.reorder_prints else []) \
        + ([f"dynamo:{args.backend}"] if args.compare_dynamo else [])
    exclude = [e for e in args.exclude.split(",") if e]
    items = [Item(seed, engines) for seed in range(args.seed, args.seed + args.n)]
    start = time.perf_counter()
    last = [0.0]

    def progress(done: int) -> None:
        if time.perf_counter() - last[0] > 30:
            last[0] = time.perf_counter()
            print(f"  ... {done}/{len(items) * len(engines)} runs, {time.perf_counter() - start:.0f} s",
                  file=sys.stderr, flush=True)

    sink = open(args.results, "w", buffering=1) if args.results else None

    def keep(result) -> None:
        sink.write(json.dumps(vars(result)) + "\n")

    try:
        results = run_batch(items, exclude=exclude, size=args.size, jobs=args.jobs, timeout_s=args.timeout,
                            progress=progress, on_result=keep if sink else None)
    finally:
        if sink is not None:
            sink.close()
    elapsed = time.perf_counter() - start
    print(f"fuzz: {args.n} programs (seeds {args.seed}..{args.seed + args.n - 1}, size {args.size}"
          + (f", grammar {args.grammar}" if args.grammar != "full" else "")
          + (f", excluding {','.join(args.asked_exclude)}" if args.asked_exclude else "") + f"), backend={args.backend}, "
          f"jobs={args.jobs}: {elapsed:.0f} s, {args.n / elapsed:.2f} programs/s")
    for engine in engines:
        spent = sum(r.seconds for r in results if r.engine == engine)
        print(f"  {engine}: {spent / max(args.n, 1):.3f} s per program ({CALLS} calls, capture included)")
    return _report(results, engines, args.n, args.by_production)


def _report(results, engines, n: int, by_production: bool) -> int:
    print(_table(results, engines, n))
    failures = _first_failures(results, engines)
    if failures:
        print(failures)
    print(_compiled(results, engines))
    if by_production:
        print(_by_production(results, engines))
    return 1 if any(r.cls not in ("ok",) for r in results if r.engine == engines[0]) else 0


def report_file(args) -> int:
    """The tables of the results kept in ``args.report`` (a run that may still be going, or was stopped)."""
    with open(args.report) as f:
        results = [Result(**json.loads(line)) for line in f if line.strip()]
    engines = list(dict.fromkeys(r.engine for r in results))
    seeds = sorted({r.seed for r in results if r.engine == engines[0]}) if engines else []
    if seeds:
        print(f"fuzz results in {args.report}: {len(seeds)} programs (seeds {seeds[0]}..{seeds[-1]})")
    return _report(results, engines, len(seeds), args.by_production)


def minimize_seed(args) -> int:
    from fuzz.minimize import minimize_failure

    exclude = [e for e in args.exclude.split(",") if e]
    program = generate(args.minimize, exclude, size=args.size)
    verdict = run_batch([Item(program.seed, [args.engine], program.source)], exclude=exclude,
                        timeout_s=args.timeout)[0]
    if verdict.cls == "ok":
        print(f"seed {args.minimize}: ok under {args.engine}; nothing to minimize")
        return 0
    small, calls = minimize_failure(program.source, program.seed, args.engine, verdict.cls, verdict.call,
                                    exclude=exclude, max_checks=args.max_checks)
    final = run_batch([Item(program.seed, [args.engine], small, calls)], exclude=exclude,
                      timeout_s=args.timeout)[0]
    print(f"# seed {args.minimize}, {args.engine}: {verdict.cls} -> {final.cls} after minimizing "
          f"(calls {calls}; arguments: fuzz.inputs.make_args({args.minimize}, call))")
    print(("# " + final.detail).replace("\n", "\n# "))
    print(small)
    return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500, help="number of programs (default 500)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--jobs", type=int, default=2, help="child processes (default 2)")
    parser.add_argument("--compare-dynamo", action="store_true", help="also run torch.compile on each program")
    parser.add_argument("--reorder-prints", action="store_true",
                        help="also run dynacap with config.reorderable_logging_functions={print}")
    parser.add_argument("--backend", default="eager", help="backend of both engines (default eager)")
    parser.add_argument("--size", type=int, default=5, help="top-level statements per program (default 5)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per program and engine (default 60)")
    parser.add_argument("--grammar", default="full", choices=GRAMMARS,
                        help="grammar version (v1: before the objects/sets/exceptions/stdlib families)")
    parser.add_argument("--exclude", default="", help="comma list of grammar productions to switch off "
                        f"(known: {', '.join(production_names())})")
    parser.add_argument("--by-production", action="store_true",
                        help="also print breaks per program among the programs using each production")
    parser.add_argument("--results", metavar="FILE", help="write each result as a JSON line as it arrives")
    parser.add_argument("--report", metavar="FILE", help="print the tables of a --results file and exit")
    parser.add_argument("--minimize", type=int, metavar="SEED", help="minimize the failure of one program")
    parser.add_argument("--engine", default="dynacap", help="engine for --minimize (dynacap[:backend], dynamo)")
    parser.add_argument("--max-checks", type=int, default=400, help="oracle runs allowed to --minimize")
    parser.add_argument("--show", type=int, metavar="SEED", help="print the program of SEED and exit")
    args = parser.parse_args(argv)
    args.asked_exclude = [e for e in args.exclude.split(",") if e]
    args.exclude = ",".join(sorted(set(args.asked_exclude) | set(exclusions_for(args.grammar))))
    if args.show is not None:
        program = generate(args.show, [e for e in args.exclude.split(",") if e], size=args.size)
        print(program.source)
        print("# productions:", ", ".join(sorted(program.features)))
        return 0
    if args.report is not None:
        return report_file(args)
    if args.minimize is not None:
        return minimize_seed(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
