"""The case worker: the subprocess that imports, infers, runs and captures one case.

Started by :mod:`dynacap.harness.isolation` with a task file in a fresh case
folder, inside the namespaces the launcher (:mod:`dynacap.harness.launcher`)
made.  It confines itself first (:mod:`dynacap.harness.sandbox`), then runs
its phases in order: ``prepare`` (import with stubs, infer constructor args and
inputs, check that eager runs twice with identical outputs, time eager) and one
phase per compiler (rebuild from the recipe, eager reference, compile, first
call, compare, steady-state timing, graph stats).  Progress goes, one JSON
line per event, through a pipe to the launcher (which alone writes the
events file), so the harness knows which phase a crash or a hang hit.  It
must not write anywhere but its scratch folder, nor decide timeouts/crashes
(the harness does).
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import time
import traceback

from .case import (COMPILE_ERROR, CRASH, EAGER_ERROR, IMPORT_ERROR, NONDETERMINISTIC, OK,
                   WRONG_RESULT, Case, jsonable)


class Events:
    """JSON-lines channel to the launcher, which checks and records it (survives a segfault)."""

    def __init__(self, fd: int):
        self.fd = fd

    def emit(self, **event) -> None:
        data = (json.dumps(jsonable(event)) + "\n").encode()
        os.write(self.fd, data)


def _tb(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-8000:]


def _err(status: str, e: BaseException, where: str) -> dict:
    msg = f"{type(e).__name__}: {e}"
    if isinstance(e, SystemExit):
        status, msg = CRASH, f"user code called sys.exit({e.code!r}) during {where}"
    elif isinstance(e, KeyboardInterrupt):
        status, msg = CRASH, f"KeyboardInterrupt during {where}"
    return {"status": status, "error": msg[:2000], "traceback": _tb(e), "where": where}


def _has_tensor(obj, depth: int = 0) -> bool:
    import dataclasses

    import torch
    if isinstance(obj, torch.Tensor):
        return True
    if depth > 20:
        return False
    if isinstance(obj, (list, tuple, set)):
        return any(_has_tensor(v, depth + 1) for v in obj)
    if isinstance(obj, dict):
        return any(_has_tensor(v, depth + 1) for v in obj.values())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return any(_has_tensor(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj))
    return False


def _median_time(fn, n: int, budget_s: float) -> tuple[float | None, int]:
    times = []
    t_end = time.perf_counter() + budget_s
    for _ in range(max(1, n)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() > t_end:
            break
    return (statistics.median(times) if times else None), len(times)


class CaseRunner:
    """State shared by the phases of one case inside one worker process."""

    def __init__(self, case: Case, cfg: dict, prepared: dict | None):
        self.case = case
        self.cfg = cfg
        self.prepared = prepared
        self.module = None
        self.target = None
        self.stubbed: list[str] = []
        self.data = None

    # ---------------------------------------------------------------- helpers
    def _import(self) -> None:
        from . import loader
        if self.target is not None:
            return
        self.module, _ = loader.import_module(self.case, self.stubbed)
        self.target = loader.resolve(self.module, self.case.qualname)
        if self.case.data:
            import torch
            self.data = torch.load(self.case.data, weights_only=False)

    def _call(self, fn, args, kwargs):
        import torch
        with torch.no_grad():
            return fn(*args, **kwargs)

    def _inputs(self, recipe: dict):
        from .inference import build_inputs
        if self.data is not None and ("args" in self.data or "kwargs" in self.data):
            return copy.deepcopy(list(self.data.get("args", []))), copy.deepcopy(dict(self.data.get("kwargs", {})))
        return build_inputs(recipe.get("args"), recipe.get("kwargs"), self.cfg["seed"])

    def _build(self, recipe: dict):
        import torch
        from .inference import seed_all, seeded
        from .values import build, build_kwargs
        if self.case.kind != "module":
            return self.target
        seed_all(self.cfg["seed"])
        if self.data is not None and ("init_args" in self.data or "init_kwargs" in self.data):
            a, k = copy.deepcopy(list(self.data.get("init_args", []))), copy.deepcopy(dict(self.data.get("init_kwargs", {})))
        else:
            a = build(recipe.get("init_args") or [], seeded(self.cfg["seed"]))
            k = build_kwargs(recipe.get("init_kwargs"), seeded(self.cfg["seed"]))
        obj = self.target(*a, **k)
        if isinstance(obj, torch.nn.Module):
            obj.eval()
        return obj

    # ---------------------------------------------------------------- phases
    def prepare(self) -> dict:
        from .compare import clone_output, identical
        from .inference import Failed, search, seed_all
        from .values import describe
        t0 = time.perf_counter()
        try:
            self._import()
        except BaseException as e:  # noqa: BLE001 - user code may raise anything
            r = _err(IMPORT_ERROR, e, "import")
            r["stubbed_imports"] = list(self.stubbed)
            return r
        base = {"stubbed_imports": list(self.stubbed), "import_s": time.perf_counter() - t0}
        if self.case.kind == "module" and not isinstance(self.target, type):
            return dict(base, status=IMPORT_ERROR, error=f"{self.case.qualname} is not a class")
        if self.case.kind == "function" and not callable(self.target):
            return dict(base, status=IMPORT_ERROR, error=f"{self.case.qualname} is not callable")
        seed = self.cfg["seed"]
        t1 = time.perf_counter()
        try:
            if self.data is not None:
                recipe = {"init_args": None, "init_kwargs": None, "args": None, "kwargs": None,
                          "data": self.case.data}
                obj = self._build(recipe)
                seed_all(seed)
                a, k = self._inputs(recipe)
                t_first = time.perf_counter()
                out1 = self._call(obj, a, k)
                first_s = time.perf_counter() - t_first
                tries = 1
            else:
                c = self.case
                t_first = time.perf_counter()
                found = search(self.target, c.kind, seed=seed, init_args=c.init_args,
                               init_kwargs=c.init_kwargs, args=c.args, kwargs=c.kwargs,
                               max_tries=self.cfg.get("max_tries", 60),
                               budget_s=self.cfg.get("infer_budget_s", 30.0), call=self._call)
                first_s = time.perf_counter() - t_first
                recipe = {"init_args": found.init_args, "init_kwargs": found.init_kwargs,
                          "args": found.args, "kwargs": found.kwargs}
                obj, out1, tries = found.obj, found.output, found.tries
        except Failed as f:
            return dict(base, status=EAGER_ERROR, error=f"{f.stage}: {f.message}"[:2000],
                        traceback=f.tb, tries=f.tries, attempts=f.attempts, where=f.stage)
        except BaseException as e:  # noqa: BLE001
            return dict(base, **_err(EAGER_ERROR, e, "eager run"))
        infer_s = time.perf_counter() - t1
        try:
            out1 = clone_output(out1)
            obj2 = self._build(recipe)
            seed_all(seed)
            a, k = self._inputs(recipe)
            out2 = clone_output(self._call(obj2, a, k))
            seed_all(seed)
            a, k = self._inputs(recipe)
            out3 = clone_output(self._call(obj2, a, k))
        except BaseException as e:  # noqa: BLE001
            return dict(base, **_err(EAGER_ERROR, e, "eager rerun"))
        info = dict(base, recipe=recipe, tries=tries, infer_s=infer_s, eager_first_s=first_s,
                    inputs=describe(a), kwargs=describe(k) if k else None)
        from .stubs import find_stub
        stub = find_stub(out1)
        if stub is not None:
            name = getattr(stub, "__qualname__", None) or type(stub).__qualname__
            return dict(info, status=EAGER_ERROR, where="eager run",
                        error=f"output is a stand-in for a missing import ({name}); the result is meaningless")
        if self.stubbed and not _has_tensor(out1):
            return dict(info, status=EAGER_ERROR, where="eager run",
                        error="output holds no tensor and imports were stubbed "
                              f"({', '.join(self.stubbed)}); the result is meaningless")
        if not (identical(out1, out2) and identical(out2, out3)):
            return dict(info, status=NONDETERMINISTIC,
                        error="eager outputs differ between calls with the same seed and inputs")
        try:
            med, n = _median_time(lambda: self._call(obj2, *self._inputs(recipe)),
                                  self.cfg.get("repeat", 5), self.cfg.get("timing_budget_s", 3.0))
        except BaseException as e:  # noqa: BLE001
            return dict(base, **_err(EAGER_ERROR, e, "eager timing"))
        return dict(info, status=OK, eager_median_s=med, eager_calls=n)

    def run_compiler(self, name: str) -> dict:
        from . import compilers
        from .compare import clone_output, compare
        from .inference import seed_all
        recipe = (self.prepared or {}).get("recipe") or {}
        seed = self.cfg["seed"]
        try:
            self._import()
            model = self._build(recipe)
            seed_all(seed)
            a, k = self._inputs(recipe)
            ref = clone_output(self._call(model, a, k))
            eager_med, _ = _median_time(lambda: self._call(model, *self._inputs(recipe)),
                                        self.cfg.get("repeat", 5), self.cfg.get("timing_budget_s", 3.0))
        except BaseException as e:  # noqa: BLE001
            return _err(EAGER_ERROR, e, "eager reference")
        res: dict = {"eager_median_s": eager_med}
        try:
            adapter = compilers.make(name, self.cfg.get("backend", "eager"), self.cfg.get("fullgraph", False))
            adapter.setup()
            compiled = adapter.compile(model)
        except BaseException as e:  # noqa: BLE001
            return dict(res, **_err(COMPILE_ERROR, e, "compile"))
        try:
            seed_all(seed)
            a, k = self._inputs(recipe)
            t0 = time.perf_counter()
            out = self._call(compiled, a, k)
            res["first_call_s"] = time.perf_counter() - t0
            out = clone_output(out)
        except BaseException as e:  # noqa: BLE001
            r = dict(res, **_err(COMPILE_ERROR, e, "first compiled call"))
            try:
                r.update(adapter.stats())
            except Exception:  # noqa: BLE001
                pass
            return r
        stats = adapter.stats()  # what the first call captured (both adapters read their own run)
        cmp = compare(out, ref, self.cfg.get("rtol", 1e-4), self.cfg.get("atol", 1e-4))
        res.update(max_error=cmp.max_error, status=OK if cmp.same else WRONG_RESULT)
        if not cmp.same:
            res["error"] = f"output differs from eager: {cmp.detail}"
        try:
            med, n = _median_time(lambda: self._call(compiled, *self._inputs(recipe)),
                                  self.cfg.get("repeat", 5), self.cfg.get("timing_budget_s", 3.0))
            res.update(median_s=med, calls=n)
        except BaseException as e:  # noqa: BLE001
            return dict(res, **_err(COMPILE_ERROR, e, "steady-state compiled call"))
        if stats:
            res.update(stats)
        try:
            adapter.reset()
        except Exception:  # noqa: BLE001
            pass
        if res.get("eager_median_s") and res.get("median_s"):
            res["overhead"] = res["median_s"] / res["eager_median_s"]
        return res


def main(task_path: str) -> None:
    """Entry of a case process: the launcher runs :func:`work` confined (never returns)."""
    from .launcher import launch
    launch(task_path, work)


def work(task_path: str, channel_fd: int, launcher: dict) -> None:
    """The worker proper: confine, report the sandbox, run the phases, report each."""
    case_dir = os.path.dirname(os.path.abspath(task_path))
    scratch = os.path.join(case_dir, "scratch")
    with open(task_path) as f:
        task = json.load(f)
    events = Events(channel_fd)
    cfg = task["config"]
    from . import sandbox
    mounts = launcher.get("mounts") or {}
    private = ("/dev/shm",) if "/dev/shm" in mounts.get("private", ()) else ()
    sb = sandbox.apply(scratch, cpu_s=cfg.get("cpu_limit_s", 600), memory_mb=cfg.get("memory_limit_mb", 4096),
                       network=cfg.get("allow_network", False), private_dirs=private)
    sb.update(sandbox.launcher_facts(launcher, task.get("sandbox") or {}))
    events.emit(event="sandbox", sandbox=sb, pid=os.getpid())
    phases = task["phases"]
    missing = [k for k, on in sandbox.protections(sb).items() if not on]
    if phases and cfg.get("require_sandbox") and missing:
        events.emit(event="start", phase=phases[0], t=time.time())
        events.emit(event="done", phase=phases[0], result={
            "status": CRASH, "where": "sandbox", "error": "--require-sandbox: not active: " + ", ".join(missing)})
        os._exit(0)
    if not phases:
        os._exit(0)
    os.chdir(scratch)
    import torch
    torch.set_num_threads(1)
    runner = CaseRunner(Case.from_dict(task["case"]), cfg, task.get("prepared"))
    for phase in phases:
        events.emit(event="start", phase=phase, t=time.time())
        t0 = time.perf_counter()
        try:
            res = runner.prepare() if phase == "prepare" else runner.run_compiler(phase)
        except BaseException as e:  # noqa: BLE001 - the worker itself must report, not die
            res = _err(CRASH, e, phase)
        res["phase_s"] = time.perf_counter() - t0
        if phase == "prepare":
            runner.prepared = res
        events.emit(event="done", phase=phase, result=res)
        if phase == "prepare" and res.get("status") != OK:
            break
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
