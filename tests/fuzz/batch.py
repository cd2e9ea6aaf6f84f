"""Run many fuzz programs in child processes, so that a crash or a hang is a class, not the end.

``run_batch(seeds, engines, ...)`` splits the seeds over ``jobs`` child
processes.  A child generates each program (or takes the given source), runs
it eagerly once and under each engine, classifies, and reports JSON events
on a pipe: ``start`` before each engine run, ``done`` with the verdict after.
The parent watches the pipe: if the child dies during a run, that
(seed, engine) is a ``crash`` (exit status and the end of stderr kept); if a
run reports nothing for ``timeout_s``, the child is killed and the run is a
``timeout``.  Either way a new child carries on with the rest.  An eager run
that dies or hangs makes the program ``invalid`` (a grammar bug, not the
engine's).  Results come back in seed order; ``on_result`` sees each one as
it arrives (a long run can keep them in a file while it goes).
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROOT = os.path.dirname(_TESTS)


@dataclass
class Item:
    """One program to run: its seed (inputs, and the program unless ``source`` is given)."""

    seed: int
    engines: list[str]
    source: str | None = None
    calls: list[int] | None = None


@dataclass
class Result:
    seed: int
    engine: str
    cls: str
    call: int | None = None
    detail: str = ""
    features: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: What the engine compiled over the program's calls (None: it did not count, or the run died).
    graphs: int | None = None
    breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)


# -- the child -----------------------------------------------------------------------------
def child_main(fd: int) -> None:
    """Entry point of a child: the job (JSON) on stdin, events on file descriptor ``fd``."""
    import logging

    import torch

    from .classify import classify
    from .engines import Engine, make_engine
    from .grammar import generate
    from .inputs import CALLS
    from .runner import run_program

    for name in ("torch._subclasses.fake_tensor", "torch._dynamo", "torch.fx"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    torch.set_num_threads(1)
    job = json.load(sys.stdin)
    out = os.fdopen(fd, "w", buffering=1)
    engines: dict = {}

    def emit(**event):
        out.write(json.dumps(event) + "\n")
        out.flush()

    for raw in job["items"]:
        item = Item(**raw)
        if item.source is None:
            program = generate(item.seed, job["exclude"], size=job["size"])
            source, features = program.source, sorted(program.features)
        else:
            source, features = item.source, []
        calls = item.calls if item.calls is not None else list(range(CALLS))
        emit(event="start", seed=item.seed, engine="eager")
        eager = run_program(source, item.seed, Engine(), calls, job["exclude"])
        for spec in item.engines:
            emit(event="start", seed=item.seed, engine=spec)
            engine = engines.get(spec) or engines.setdefault(spec, make_engine(spec))
            start = time.perf_counter()
            run = run_program(source, item.seed, engine, calls, job["exclude"])
            verdict = classify(eager, run)
            emit(event="done", seed=item.seed, engine=spec, cls=verdict.cls, call=verdict.call,
                 detail=verdict.detail, features=features, seconds=time.perf_counter() - start,
                 graphs=run.graphs, breaks=run.breaks, break_reasons=run.break_reasons)
    emit(event="end")


# -- the parent ----------------------------------------------------------------------------
def _run_child(items: list[Item], exclude, size: int, timeout_s: float, results: list[Result]) -> None:
    """Run ``items`` in children until all are done, appending to ``results`` (crashes restart)."""
    pending = list(items)
    while pending:
        read_fd, write_fd = os.pipe()
        job = {"items": [vars(i) for i in pending], "exclude": sorted(exclude), "size": size}
        with tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-c", f"import sys; sys.path[:0] = [{_TESTS!r}, {_ROOT!r}]; "
                 f"from fuzz.batch import child_main; child_main({write_fd})"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, pass_fds=(write_fd,))
            os.close(write_fd)
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
            in_flight, finished = None, False
            buffer = b""
            deadline = time.monotonic() + timeout_s + 60  # startup: imports
            killed = False
            while True:
                wait = deadline - time.monotonic()
                ready = select.select([read_fd], [], [], max(wait, 0))[0] if wait > 0 else []
                if not ready:
                    proc.kill()
                    killed = True
                    break
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    event = json.loads(line)
                    deadline = time.monotonic() + timeout_s
                    if event["event"] == "start":
                        in_flight = (event["seed"], event["engine"])
                    elif event["event"] == "done":
                        results.append(Result(event["seed"], event["engine"], event["cls"], event["call"],
                                              event["detail"], event["features"], event["seconds"],
                                              event["graphs"], event["breaks"], event["break_reasons"]))
                        in_flight = None
                    else:
                        finished = True
            os.close(read_fd)
            proc.wait()
            stderr.seek(0)
            tail = stderr.read().decode(errors="replace")[-1500:]
        if finished:
            return
        if in_flight is None:  # died before its first program (or between two): report it once
            raise RuntimeError(f"fuzz child exited with status {proc.returncode}:\n{tail}")
        seed, engine = in_flight
        cls = "timeout" if killed else "crash"
        detail = f"no report for {timeout_s:.0f} s" if killed else f"exit status {proc.returncode}; stderr: {tail}"
        item = next(i for i in pending if i.seed == seed)
        if engine == "eager":
            for spec in item.engines:
                results.append(Result(seed, spec, "invalid", None, f"eager run: {cls}: {detail}"))
            rest = []
        else:
            results.append(Result(seed, engine, cls, None, detail))
            rest = item.engines[item.engines.index(engine) + 1:]  # the engines not run yet
        index = pending.index(item)
        pending = ([Item(seed, rest, item.source, item.calls)] if rest else []) + pending[index + 1:]


class _Results(list):
    """The results of a batch, appended by the children's threads; each one shown to ``on_result`` too."""

    def __init__(self, on_result):
        super().__init__()
        self.on_result = on_result
        self.lock = threading.Lock()

    def append(self, result: Result) -> None:
        with self.lock:
            super().append(result)
            if self.on_result is not None:
                self.on_result(result)


def run_batch(items: list[Item], *, exclude=(), size: int = 5, jobs: int = 1, timeout_s: float = 60.0,
              progress=None, on_result=None) -> list[Result]:
    """Run every item (see ``Item``) in ``jobs`` parallel children; results sorted by (seed, engine)."""
    results = _Results(on_result)
    errors: list[BaseException] = []

    def work(chunk):
        try:
            _run_child(chunk, exclude, size, timeout_s, results)
        except BaseException as e:  # re-raised below, in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(items[j::jobs],)) for j in range(jobs) if items[j::jobs]]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=2.0)
        if progress is not None:
            progress(len(results))
    if errors:
        raise errors[0]
    order = {spec: i for i, spec in enumerate(items[0].engines)} if items else {}
    return sorted(results, key=lambda r: (r.seed, order.get(r.engine, 99)))
