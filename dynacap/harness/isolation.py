"""Running one case in isolated subprocesses and turning what happened into a record.

Runs in the harness process (or on a Dask worker).  For each case it makes a
case folder outside the corpus and the output folder (the task, the events
the launcher recorded, the output files, and the ``scratch`` subfolder that
is the case's), a ``pids`` cgroup (:mod:`dynacap.harness.cgroups`), starts
the worker (:mod:`dynacap.harness.launcher`, then
:mod:`dynacap.harness.worker`) with a scrubbed environment in its own
session, enforces the wall-clock limit by killing the process group, kills
whatever is left in the cgroup, and reads the events.  A phase that was running when
the worker died becomes ``crash`` (or ``timeout``); phases not yet run are
retried in a fresh worker, so one compiler's crash does not cost the other's
result.  It must not interpret user code itself, nor write results files (the
caller does).
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .case import CASE_LEVEL, CRASH, OK, TIMEOUT, Case, jsonable
from . import cgroups, sandbox
from .launcher import Protocol

#: Bootstrap of a plain worker process (``python -I -B -c``; see ``sandbox.boot_script``).
BOOT = sandbox.boot_script("from dynacap.harness.worker import main\nmain(sys.argv[2])")

_LIVE: set = set()           # Popen objects or pids of running workers
_LIVE_LOCK = threading.Lock()
_ZYGOTE = None
_ZYGOTE_FAILED = False
_ZYGOTE_LOCK = threading.Lock()


def kill_all() -> None:
    """Kill every worker this process started that is still running (on interrupt)."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for p in procs:
        _kill_group(p)


def get_zygote():
    """The fork server of this process, started on first use; None if unavailable."""
    global _ZYGOTE, _ZYGOTE_FAILED
    with _ZYGOTE_LOCK:
        if _ZYGOTE is not None and _ZYGOTE.alive():
            return _ZYGOTE
        if _ZYGOTE_FAILED:
            return None
        from .zygote import Zygote, ZygoteDied
        home = tempfile.mkdtemp(prefix="dynacap-zygote-")
        atexit.register(shutil.rmtree, home, True)
        try:
            _ZYGOTE = Zygote(PACKAGE_PARENT, sandbox.child_env(home), os.path.join(home, "zygote.log"))
            atexit.register(_ZYGOTE.close)
        except (ZygoteDied, OSError):
            _ZYGOTE, _ZYGOTE_FAILED = None, True
        return _ZYGOTE


PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _signame(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def _tail(path: str, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _read_events(path: str) -> list[dict]:
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def _kill_group(proc) -> None:
    pid = proc if isinstance(proc, int) else proc.pid
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        if isinstance(proc, int):
            os.kill(pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _run_forked(z, task: str, env: dict, scratch: str, out_path: str, err_path: str, timeout_s: float):
    """Run the worker as a child of the zygote; returns (rc, timed_out)."""
    pid = z.spawn(task, env, scratch, out_path, err_path)
    with _LIVE_LOCK:
        _LIVE.add(pid)
    try:
        rc = z.wait(pid, timeout_s)
        if rc is None and not z.alive():
            _kill_group(pid)
            from .zygote import ZygoteDied
            raise ZygoteDied("zygote died while a case ran")
        timed_out = rc is None
        if timed_out:
            _kill_group(pid)
            rc = z.wait(pid, 30)
            rc = -signal.SIGKILL if rc is None else rc
        else:
            _kill_group(pid)        # leftovers of the group (daemons the case started)
        return rc, timed_out
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(pid)


def _write_task(case_dir: str, case: Case, phases: list[str], cfg: dict, prepared, group) -> str:
    task = os.path.join(case_dir, "task.json")
    with open(task, "w") as f:
        json.dump(jsonable({"case": case.to_dict(), "phases": phases, "config": cfg, "prepared": prepared,
                            "sandbox": {"cgroup": group.path, "cgroup_limit": group.max_pids,
                                        "cgroup_note": group.note,
                                        "namespaces": cfg.get("namespaces", True)}}), f)
    return task


def run_worker(case: Case, phases: list[str], cfg: dict, prepared: dict | None,
               timeout_s: float) -> dict:
    """One worker process; returns its events, exit status and output tails.

    The case folder holds the task, the launcher's events and the output
    files; only its ``scratch`` subfolder is the case's to write.
    """
    case_dir = tempfile.mkdtemp(prefix="dynacap-case-")
    scratch = os.path.join(case_dir, "scratch")
    os.mkdir(scratch, 0o700)
    group = cgroups.CaseGroup(int(cfg.get("max_processes", 256)))
    out_path, err_path = os.path.join(case_dir, "stdout.txt"), os.path.join(case_dir, "stderr.txt")
    try:
        task = _write_task(case_dir, case, phases, cfg, prepared, group)
        env = sandbox.child_env(scratch)
        t0 = time.monotonic()
        z = get_zygote() if cfg.get("fork_server", True) else None
        rc, forked = None, False
        if z is not None:
            from .zygote import ZygoteDied
            try:
                rc, timed_out = _run_forked(z, task, env, scratch, out_path, err_path, timeout_s)
                forked = True
            except ZygoteDied:
                rc = None
                group.kill_all()
                for path in (os.path.join(case_dir, "events.jsonl"), out_path, err_path):
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
        if rc is None:
            t0 = time.monotonic()
            rc, timed_out = _run_subprocess(task, env, scratch, out_path, err_path, timeout_s)
        elapsed = time.monotonic() - t0
        leftovers = group.close()
        return {"events": _read_events(os.path.join(case_dir, "events.jsonl")), "rc": rc,
                "timed_out": timed_out, "elapsed_s": elapsed, "leftovers_killed": leftovers,
                "stderr": _tail(err_path), "stdout": _tail(out_path, 1500), "forked": forked}
    finally:
        group.close()
        shutil.rmtree(case_dir, ignore_errors=True)


def _run_subprocess(task: str, env: dict, scratch: str, out_path: str, err_path: str, timeout_s: float):
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", BOOT, PACKAGE_PARENT, task],
                                cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True, close_fds=True)
        with _LIVE_LOCK:
            _LIVE.add(proc)
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            rc = proc.wait()
        finally:
            _kill_group(proc)           # leftovers of the group (daemons the case started)
            with _LIVE_LOCK:
                _LIVE.discard(proc)
    return rc, timed_out


#: Bootstrap of the sandbox probe: the harness modules alone (no torch, no capture engine).
PROBE_BOOT = ("import sys, types\n"
              "pkg = types.ModuleType('dynacap')\n"
              "pkg.__path__ = [sys.argv[1] + '/dynacap']\n"
              "sys.modules['dynacap'] = pkg\n"
              "from dynacap.harness.worker import main\n"
              "main(sys.argv[2])\n")


def probe_sandbox(cfg: dict, timeout_s: float = 30.0) -> dict:
    """The sandbox a case of this run gets, found by running a worker with no phase
    (the launcher and the worker's confinement, nothing else); {} if that failed."""
    case_dir = tempfile.mkdtemp(prefix="dynacap-probe-")
    scratch = os.path.join(case_dir, "scratch")
    os.mkdir(scratch, 0o700)
    group = cgroups.CaseGroup(int(cfg.get("max_processes", 256)))
    try:
        probe = Case(id="sandbox-probe", project="", root=PACKAGE_PARENT, qualname="")
        task = _write_task(case_dir, probe, [], cfg, None, group)
        try:
            subprocess.run([sys.executable, "-I", "-B", "-c", PROBE_BOOT, PACKAGE_PARENT, task], cwd=scratch,
                           env=sandbox.child_env(scratch), stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout_s, start_new_session=True)
        except subprocess.TimeoutExpired:
            return {}
        for ev in _read_events(os.path.join(case_dir, "events.jsonl")):
            if ev.get("event") == "sandbox":
                return ev.get("sandbox") or {}
        return {}
    finally:
        group.close()
        shutil.rmtree(case_dir, ignore_errors=True)


def run_case(case: Case, cfg: dict) -> dict:
    """Run every phase of ``case`` (prepare + one per compiler); returns the record."""
    compilers = list(cfg["compilers"])
    timeout_s = float(case.timeout or cfg.get("timeout_s", 120))
    wcfg = dict(cfg, cpu_limit_s=timeout_s + 5)
    pending = ["prepare"] + compilers
    if cfg.get("isolate_compilers"):
        groups_limit = 2        # prepare + one compiler per process
    else:
        groups_limit = len(pending)
    results: dict[str, dict] = {}
    prepared = None
    sandbox_info = None
    t_start = time.time()
    workers = 0
    while pending and workers < len(compilers) + 2:
        phases = pending[:groups_limit] if prepared is None else \
            pending[:max(1, groups_limit - 1)]
        w = run_worker(case, phases, wcfg, prepared, timeout_s)
        workers += 1
        launcher = "fork-server" if w.get("forked") else "subprocess"
        started, last_done, violation = None, None, None
        protocol = Protocol(phases)            # again: without Landlock the file is writable
        for ev in w["events"]:
            if ev.get("event") == "violation":
                violation = ev.get("detail")
                break
            if ev.get("event") == "launcher":
                continue
            why = protocol.check(ev)
            if why:
                violation = f"events file: {why}"
                break
            if ev.get("event") == "sandbox":
                sandbox_info = ev.get("sandbox")
            elif ev.get("event") == "start":
                started, last_done = ev.get("phase"), None
            elif ev.get("event") == "done":
                ph = ev.get("phase")
                results[ph] = ev.get("result") or {}
                if ph == "prepare":
                    prepared = results[ph]
                if ph in pending:
                    pending.remove(ph)
                started, last_done = None, ph
        if violation:
            # the phase running, or the one whose result came last (the case may have
            # written it): neither result is the worker's
            ph = started or last_done or pending[0]
            results[ph] = {"status": CRASH, "where": ph,
                           "error": f"the case wrote to the harness's result channel during {ph} "
                                    f"({violation}); the worker was killed"}
            if ph in pending:
                pending.remove(ph)
            if ph == "prepare":
                prepared = results[ph]
                break
            continue
        if prepared is not None and prepared.get("status") != OK:
            break
        if started is not None or (pending and pending[0] in phases):
            ph = started or pending[0]
            if w["timed_out"]:
                res = {"status": TIMEOUT, "error": f"no result after {timeout_s:.0f}s (wall clock)",
                       "where": ph}
            else:
                rc = w["rc"]
                how = _signame(rc) if rc < 0 else f"exit code {rc}"
                res = {"status": CRASH, "error": f"worker died during {ph}: {how}", "where": ph}
            res["stderr_tail"] = w["stderr"][-3000:]
            results[ph] = res
            if ph == "prepare":
                prepared = res
                break
            pending.remove(ph)
    rec = make_record(case, cfg, results, sandbox_info, time.time() - t_start, t_start, workers)
    rec["launcher"] = launcher
    return rec


def make_record(case: Case, cfg: dict, results: dict, sandbox_info, duration: float,
                t_start: float, workers: int) -> dict:
    prep = results.get("prepare") or {"status": CRASH, "error": "no result"}
    per_compiler = {}
    for c in cfg["compilers"]:
        if prep.get("status") != OK:
            r = {"status": prep.get("status")}
            if prep.get("status") not in CASE_LEVEL:
                r["error"] = prep.get("error")
        else:
            r = results.get(c) or {"status": CRASH, "error": "no result"}
        per_compiler[c] = r
    return jsonable({
        "id": case.id, "project": case.project, "file": case.file, "module": case.module,
        "qualname": case.qualname, "kind": case.kind, "source": case.source,
        "prepare": prep, "results": per_compiler,
        "config": {k: cfg.get(k) for k in ("backend", "fullgraph", "seed", "compilers")},
        "run_id": cfg.get("run_id"), "started": t_start, "duration_s": duration,
        "workers": workers, "sandbox": sandbox_info,
        "checks_compiling": bool(case.extra.get("checks_compiling")),
    })
