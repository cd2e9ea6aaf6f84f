"""Command line of dynacap: ``dynacap corpus ...``, ``dynacap explain ...`` (see ``--help`` of each).

Parses arguments and calls the Python API of the harness
(:mod:`dynacap.harness`) or of ``explain``.  It must not contain harness logic itself.
"""
from __future__ import annotations

import argparse
import shlex
import signal
import sys

CORPUS_HELP = """\
Run dynacap (and/or torch.compile's Dynamo) over a corpus of PyTorch code and
report, per case, whether the captured program matches eager, how many graphs
and graph breaks it took, and how long it took.

PATH is one of:
  * a project checkout (a folder with setup.py/pyproject.toml/requirements.txt,
    src/, .git, dynacap_cases.jsonl or .py files at its top);
  * a folder of such checkouts (each subfolder is a project);
  * a manifest FILE.jsonl of explicit cases, one JSON object per line:
      {"file": "pkg/mod.py" | "module": "torch.nn", "class": "Net" | "function": "f",
       "init_args": [...], "init_kwargs": {...}, "args": [...], "kwargs": {...},
       "data": "inputs.pt", "root": "relative/root", "project": "name", "timeout": 30}
    Values are JSON or specs such as {"tensor": [2, 3, 32, 32], "dtype": "float32"},
    {"tuple": [...]}, {"config": {"hidden_size": 16}}; omitted args are inferred.

WARNING: the harness EXECUTES the projects' code.  Each case runs in its own
subprocess with a scrubbed environment, a scratch working folder, its own PID
and mount namespaces (own /proc, private /tmp and /dev/shm), a pids cgroup,
resource limits, no capabilities, no network where the kernel allows it and,
with Landlock, no writes outside its scratch folder and scoped signals and
abstract sockets.  What is active is printed at the start and listed in the
report (--require-sandbox: refuse to run without all of it).  This reduces,
but does not remove, the risk of running untrusted code (docs/corpus.md,
threat model): use a throw-away machine or container for crawled code.

Statuses: ok, wrong_result, compile_error, eager_error, import_error, timeout,
crash, nondeterministic.  Outputs in --out: results.jsonl (one record per case;
--resume skips finished cases), report.md, report.html (offline, inline SVG),
run.json, discovery.json.
"""

EPILOG = """\
examples:
  dynacap corpus tests/corpus_fixtures --compiler both --out out/
  dynacap corpus ~/checkouts --jobs 2 --timeout 60 --sample 200 --seed 1 --out runs/a
  dynacap corpus ~/checkouts --out runs/a --resume
  dynacap corpus cases.jsonl --scheduler tcp://SCHEDULER_HOST:8786 --out runs/dask
  dynacap corpus cases.jsonl --scheduler local:2 --out runs/local-dask
"""


def _corpus_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("corpus", help="run the capture engine over a corpus of projects",
                       description=CORPUS_HELP, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", metavar="PATH", help="project checkout, folder of checkouts, or .jsonl manifest")
    p.add_argument("--out", default="corpus-out", metavar="DIR", help="output folder (default: corpus-out)")
    p.add_argument("--compiler", choices=("dynacap", "dynamo", "both"), default="dynacap",
                   help="what to run: dynacap, torch.compile (dynamo) or both side by side (default: dynacap)")
    p.add_argument("--backend", default="eager", help="backend for the captured graphs (default: eager)")
    p.add_argument("--fullgraph", action="store_true", help="require one graph per case (breaks become compile_error)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="cases run in parallel locally (default: 1)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="wall-clock limit per case worker process, seconds (default: 120)")
    p.add_argument("--memory-limit", type=int, default=4096, metavar="MB",
                   help="address-space limit per worker, MiB; 0 for none (default: 4096)")
    p.add_argument("--sample", type=int, default=None, metavar="N", help="run a random sample of N cases")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed for --sample and for all inputs (default: 0)")
    p.add_argument("--resume", action="store_true", help="keep finished cases of --out/results.jsonl, run the rest")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on a Dask distributed scheduler (tcp://host:port), or 'local[:N]' for a "
                        "local cluster of N worker processes; needs dask[distributed]")
    p.add_argument("--repeat", type=int, default=5, metavar="N", help="calls for steady-state medians (default: 5)")
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance vs eager (default: 1e-4)")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance vs eager (default: 1e-4)")
    p.add_argument("--isolate-compilers", action="store_true",
                   help="run each compiler in its own worker process (slower, fully independent)")
    p.add_argument("--no-fork-server", action="store_true",
                   help="start every worker as a fresh interpreter instead of forking a pre-warmed one")
    p.add_argument("--require-sandbox", action="store_true",
                   help="refuse to run unless every protection of the sandbox is active here (own PID and mount "
                        "namespaces, pids cgroup, Landlock 6 with scoping, network namespace, no capabilities)")
    p.add_argument("--max-processes", type=int, default=256, metavar="N",
                   help="processes and threads per case (cgroup pids.max; default: 256)")
    p.add_argument("--report-only", action="store_true", help="only rebuild the reports from --out/results.jsonl")
    p.add_argument("--no-progress", action="store_true", help="no progress output")
    return p


def _explain_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("explain", help="capture one function or module once and report graphs, breaks, code",
                       description="Run FILE.py:NAME once under capture (a function, or an nn.Module class "
                       "built with --init and put in eval mode) and print the explain report: graphs with "
                       "shapes and FLOPs, graph breaks, guards. The file's code is imported and run.",
                       epilog="example:\n  dynacap explain model.py:Net --init '[16]' "
                       "--args '[{\"tensor\": [2, 3, 32, 32]}]' --html report.html",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="FILE.py:NAME", help="the function or nn.Module class to explain")
    p.add_argument("--args", default="[]", metavar="JSON", help="positional arguments as specs (as in corpus "
                   "manifests: {\"tensor\": [2, 3]}, {\"tuple\": [...]}, plain JSON values)")
    p.add_argument("--kwargs", default="{}", metavar="JSON", help="keyword arguments as a JSON object of specs")
    p.add_argument("--init", default="[]", metavar="JSON", help="constructor arguments of a module class")
    p.add_argument("--dynamic", action="store_true", help="capture with dynamic=True (symbolic sizes)")
    p.add_argument("--code", action="store_true", help="also print the rewritten code (explain(...).code)")
    p.add_argument("--html", metavar="OUT.html", help="write the report as one offline HTML page (graphs drawn)")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dynacap", description="dynacap command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _corpus_parser(sub)
    _explain_parser(sub)
    return parser


def explain_main(args) -> int:
    import json

    from .explain import explain_file

    out = explain_file(args.target, json.loads(args.args), json.loads(args.kwargs), json.loads(args.init),
                       dynamic=True if args.dynamic else None)
    print(out)
    if args.code:
        print("\nRewritten code:\n" + out.code)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(out.html())
        print(f"\nreport: {args.html}")
    return 0


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def corpus_main(args, argv) -> int:
    import os

    from .harness import CorpusOptions, run_corpus
    from .harness.api import SandboxIncomplete
    from .harness.report import headline_lines, write_reports
    from .harness.results import read_records
    if args.report_only:
        import json
        recs = read_records(os.path.join(args.out, "results.jsonl"))
        meta = {"backend": args.backend, "fullgraph": args.fullgraph}
        try:
            with open(os.path.join(args.out, "run.json"), encoding="utf-8") as f:
                meta.update(json.load(f))
        except (OSError, ValueError):
            pass
        summary = write_reports(args.out, recs, meta)
        print("\n".join(headline_lines(summary)))
        return 0
    if not args.paths:
        print("dynacap corpus: give at least one PATH (see --help)", file=sys.stderr)
        return 2
    opts = CorpusOptions(paths=args.paths, out=args.out, compiler=args.compiler, backend=args.backend,
                         fullgraph=args.fullgraph, jobs=args.jobs, timeout=args.timeout,
                         memory_limit_mb=args.memory_limit, sample=args.sample, seed=args.seed,
                         resume=args.resume, scheduler=args.scheduler, repeat=args.repeat, rtol=args.rtol,
                         atol=args.atol, isolate_compilers=args.isolate_compilers,
                         progress=not args.no_progress, fork_server=not args.no_fork_server,
                         require_sandbox=args.require_sandbox, max_processes=args.max_processes,
                         command="dynacap " + " ".join(shlex.quote(a) for a in argv))
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:          # not the main thread
        pass
    try:
        res = run_corpus(opts)
    except SandboxIncomplete as e:
        print(f"dynacap corpus: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; finished cases are in {args.out}/results.jsonl (rerun with --resume)",
              file=sys.stderr)
        return 130
    print(f"{res.cases} cases ({res.executed} run, {res.skipped} kept from a previous run); "
          f"reports: {res.out}/report.md, {res.out}/report.html")
    for line in res.headline:
        print(line)
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "corpus":
        return corpus_main(args, argv)
    if args.command == "explain":
        return explain_main(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
