"""Python API of the corpus harness: ``run_corpus`` and its options.

Runs in the harness process: discovers cases, skips finished ones on resume,
checks the sandbox a case would get (``--require-sandbox`` refuses to run
without every protection), runs the rest locally or on Dask, appends records
as they finish, and writes
``report.md``/``report.html``/``run.json`` at the end.  The CLI
(:mod:`dynacap.cli`) is a thin layer over this.  It must not execute project
code in-process: that only happens in sandboxed workers.
"""
from __future__ import annotations

import datetime
import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field

from .case import COMPILERS
from .discovery import discover, sample
from .isolation import probe_sandbox
from .progress import Progress
from .report import headline_lines, write_reports
from .results import ResultWriter, is_finished, read_records, write_meta
from .sandbox import protections


@dataclass
class CorpusOptions:
    paths: list[str]
    out: str = "corpus-out"
    compiler: str = "both"               # dynacap | dynamo | both
    backend: str = "eager"
    fullgraph: bool = False
    jobs: int = 1
    timeout: float = 120.0               # seconds per worker process
    memory_limit_mb: int = 4096
    sample: int | None = None
    seed: int = 0
    resume: bool = False
    scheduler: str | None = None
    repeat: int = 5                      # calls for the steady-state median
    rtol: float = 1e-4
    atol: float = 1e-4
    isolate_compilers: bool = False
    max_tries: int = 60
    infer_budget_s: float | None = None
    progress: bool = True
    command: str | None = None
    allow_network: bool = False
    fork_server: bool = True             # start workers from a pre-warmed zygote
    max_processes: int = 256             # pids.max of each case's cgroup (processes and threads)
    require_sandbox: bool = False        # refuse to run unless every protection is active
    namespaces: bool = True              # per-case PID/mount namespaces (False: only for tests)

    def compilers(self) -> list[str]:
        """Compilers in execution order.  Dynamo runs first: if it takes the worker
        down, dynacap still runs in a fresh one (and the other way round)."""
        if self.compiler == "both":
            return ["dynamo", "dynacap"]
        if self.compiler not in COMPILERS:
            raise ValueError(f"unknown compiler {self.compiler!r}")
        return [self.compiler]


class SandboxIncomplete(RuntimeError):
    """``--require-sandbox`` and a protection is not active on this machine."""


@dataclass
class RunResult:
    out: str
    cases: int
    executed: int
    skipped: int
    summary: dict = field(repr=False, default_factory=dict)
    headline: list = field(default_factory=list)


def worker_config(opts: CorpusOptions, run_id: str) -> dict:
    return {
        "compilers": opts.compilers(), "backend": opts.backend, "fullgraph": opts.fullgraph,
        "seed": opts.seed, "timeout_s": opts.timeout, "memory_limit_mb": opts.memory_limit_mb,
        "repeat": opts.repeat, "rtol": opts.rtol, "atol": opts.atol,
        "isolate_compilers": opts.isolate_compilers, "max_tries": opts.max_tries,
        "infer_budget_s": opts.infer_budget_s if opts.infer_budget_s is not None else min(30.0, opts.timeout / 3),
        "timing_budget_s": max(0.5, min(3.0, opts.timeout / 20)), "run_id": run_id,
        "allow_network": opts.allow_network, "fork_server": opts.fork_server,
        "max_processes": opts.max_processes, "require_sandbox": opts.require_sandbox,
        "namespaces": opts.namespaces,
    }


def run_corpus(opts: CorpusOptions) -> RunResult:
    """Run the corpus described by ``opts``; returns counts and the summary."""
    from . import scheduler
    out = os.path.abspath(opts.out)
    os.makedirs(out, exist_ok=True)
    disc = discover(opts.paths)
    cases = sample(disc.cases, opts.sample, opts.seed)
    with open(os.path.join(out, "discovery.json"), "w", encoding="utf-8") as f:
        json.dump(dict(disc.summary(), selected=len(cases), paths=[os.path.abspath(p) for p in opts.paths]),
                  f, indent=2)
    compilers = opts.compilers()
    run_id = uuid.uuid4().hex[:12]
    cfg = worker_config(opts, run_id)
    finished: set[str] = set()
    if opts.resume:
        wanted = {c.id for c in cases}
        for rec in read_records(os.path.join(out, "results.jsonl")):
            if rec["id"] in wanted and is_finished(rec, compilers, cfg):
                finished.add(rec["id"])
    todo = [c for c in cases if c.id not in finished]
    sb = probe_sandbox(cfg) if todo else {}
    active = protections(sb)
    missing = [k for k, on in active.items() if not on]
    if opts.require_sandbox and todo and missing:
        raise SandboxIncomplete("--require-sandbox: not active on this machine: " + "; ".join(missing))
    writer = ResultWriter(out, resume=opts.resume)
    prog = Progress(len(todo), compilers, enabled=opts.progress)
    if opts.resume:
        prog.note(f"resume: {len(finished)} finished cases kept, {len(todo)} to run")
    prog.note(f"dynacap corpus: {len(cases)} cases from {len(disc.projects)} projects "
              f"({len(disc.parse_errors)} files unparsable), compilers {', '.join(compilers)}, "
              f"{'scheduler ' + opts.scheduler if opts.scheduler else f'{opts.jobs} local job(s)'}")
    if todo:
        prog.note("sandbox: " + (f"missing {'; '.join(missing)}" if missing else "every protection active")
                  + f" (of {len(active)}; see the report's sandbox section)")
    meta = {"command": opts.command, "options": asdict(opts), "run_id": run_id, "backend": opts.backend,
            "fullgraph": opts.fullgraph, "compilers": compilers,
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "cases": len(cases), "skipped_finished": len(finished), "to_run": len(todo),
            "sandbox": {"probe": sb, "missing": missing, "required": opts.require_sandbox}}
    write_meta(out, dict(meta, state="running"))

    def on_result(rec: dict) -> None:
        writer.write(rec)
        prog.update(rec)

    t0 = time.monotonic()
    try:
        if opts.scheduler:
            scheduler.run_dask(todo, cfg, opts.scheduler, on_result)
        else:
            scheduler.run_local(todo, cfg, opts.jobs, on_result)
    finally:
        writer.close()
    wanted = {c.id for c in cases}
    records = [r for r in read_records(os.path.join(out, "results.jsonl")) if r["id"] in wanted]
    summary = write_reports(out, records, meta)
    meta.update(state="finished", finished=datetime.datetime.now().isoformat(timespec="seconds"),
                wall_s=time.monotonic() - t0, executed=len(todo), headline=headline_lines(summary),
                summary={c: {k: v for k, v in s.items() if k.startswith(("pct_", "ok", "one_graph", "cases",
                                                                       "runnable", "projects", "status"))}
                         for c, s in summary["per_compiler"].items()})
    write_meta(out, meta)
    return RunResult(out=out, cases=len(cases), executed=len(todo), skipped=len(finished),
                     summary=summary, headline=headline_lines(summary))
