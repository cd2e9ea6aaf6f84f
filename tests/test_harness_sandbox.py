"""Tests of the corpus harness sandbox pieces (issue 14): launcher, namespaces, cgroup, channel.

The launcher runs here in a small subprocess with a test worker body instead
of the real worker (no torch, a fraction of a second each).  A check whose
kernel feature is missing on this machine is skipped with the reason, never
failed; the end-to-end probes over the fixture corpus are in
``test_harness_corpus.py`` (``test_probe_*``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from dynacap.harness import cgroups, charts, progress, sandbox, summary
from dynacap.harness.launcher import Protocol
from dynacap.harness.report import render_md

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAEMON = f"dct-{os.getpid() % 100000}"      # process name of the test daemons (15 chars at most)

LAUNCH = r"""
import json, os, sys, types
pkg = types.ModuleType("dynacap"); pkg.__path__ = [sys.argv[1] + "/dynacap"]; sys.modules["dynacap"] = pkg
from dynacap.harness import launcher
body = open(sys.argv[3]).read()
def worker(task_path, fd, info):
    exec(body, {"task_path": task_path, "fd": fd, "info": info})
launcher.launch(sys.argv[2], worker)
"""

PRELUDE = r"""
import ctypes, json, os, signal, time
scratch = os.path.join(os.path.dirname(task_path), "scratch")
def emit(**e):
    os.write(fd, (json.dumps(e) + "\n").encode())
def observe(**kw):
    with open(os.path.join(scratch, "obs.json"), "w") as f:
        json.dump(dict(kw, info=info), f)
def daemon(name):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)
            time.sleep(30)
            os._exit(0)
        os._exit(0)
emit(event="sandbox", sandbox={})
"""


def _launch(tmp_path, body: str, phases=("prepare",), group=None, namespaces=True):
    """Run the launcher with ``body`` as the worker; returns (rc, events, observations)."""
    case_dir = tmp_path / "case"
    (case_dir / "scratch").mkdir(parents=True)
    task = case_dir / "task.json"
    task.write_text(json.dumps({"case": {"root": str(tmp_path)}, "phases": list(phases), "config": {},
                                "sandbox": {"cgroup": group.path if group else None,
                                            "namespaces": namespaces}}))
    (tmp_path / "body.py").write_text(PRELUDE + body)
    r = subprocess.run([sys.executable, "-I", "-c", LAUNCH, REPO, str(task), str(tmp_path / "body.py")],
                       capture_output=True, text=True, timeout=60, start_new_session=True)
    events = [json.loads(x) for x in (case_dir / "events.jsonl").read_text().splitlines()]
    obs = case_dir / "scratch" / "obs.json"
    return r.returncode, events, (json.loads(obs.read_text()) if obs.exists() else None), r.stderr


def _alive(name: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == name:
                    out.append(int(pid))
        except OSError:
            pass
    return out


def _needs_namespaces(events):
    mode = events[0].get("namespaces")
    if mode == "unavailable":
        pytest.skip(f"no PID/mount namespaces here: {events[0].get('namespaces_note')}")


# ----------------------------------------------------------------- the channel's protocol
def test_protocol_accepts_the_worker_sequence_only():
    p = Protocol(["prepare", "dynamo"])
    ok = [{"event": "sandbox"}, {"event": "start", "phase": "prepare"},
          {"event": "done", "phase": "prepare", "result": {"status": "ok"}},
          {"event": "start", "phase": "dynamo"}, {"event": "done", "phase": "dynamo", "result": {"status": "ok"}}]
    assert [p.check(e) for e in ok] == [None] * 5
    assert "after the last phase" in p.check({"event": "done", "phase": "dynamo", "result": {"status": "ok"}})
    bad = [
        [{"event": "start", "phase": "prepare"}],                                      # before sandbox
        [{"event": "sandbox"}, {"event": "done", "phase": "prepare", "result": {"status": "ok"}}],
        [{"event": "sandbox"}, {"event": "start", "phase": "dynamo"}],                  # out of order
        [{"event": "sandbox"}, {"event": "start", "phase": "prepare"},
         {"event": "done", "phase": "prepare", "result": {"status": "passed!"}}],       # no such status
        [{"event": "sandbox"}, {"event": "sandbox"}],
        [{"event": "sandbox"}, {"event": "start", "phase": "prepare"},
         {"event": "done", "phase": "prepare", "result": {"status": "eager_error"}},
         {"event": "start", "phase": "dynamo"}],                                        # prepare failed: the end
        [{"event": "sandbox"}, "not a dict"],
    ]
    for seq in bad:
        p = Protocol(["prepare", "dynamo"])
        assert [p.check(e) for e in seq][-1] is not None, seq


# ----------------------------------------------------------------- launcher end to end
def test_case_has_its_own_pid_namespace_proc_tmp_and_shm(tmp_path):
    shm_name = f"dcprobe-t-{os.getpid()}"
    rc, events, obs, err = _launch(tmp_path, f"""
observe(pid=os.getpid(), ppid=os.getppid(), procs=[p for p in os.listdir("/proc") if p.isdigit()],
        shm=os.listdir("/dev/shm"), tmp=os.listdir("/tmp"), run=os.listdir("/run"),
        homes={{h: os.listdir(h) for h in ("/root", "/home") if os.path.isdir(h)}})
open("/dev/shm/{shm_name}", "w").write("left")
daemon({DAEMON!r})
time.sleep(0.2)
""")
    _needs_namespaces(events)
    assert rc == 0, err
    assert obs["pid"] != 1 and obs["ppid"] == 1, obs             # the worker under the namespace's init
    mounts = obs["info"]["mounts"]
    proc = mounts.get("proc")
    if proc not in ("own", "hidden") or not {"/tmp", "/dev/shm", "/run"} <= set(mounts["private"]):
        pytest.skip(f"namespaces without private mounts here: {mounts}")   # hidden: fresh /proc refused
    if proc == "own":
        assert sorted(obs["procs"]) == sorted(["1", str(obs["pid"])]), obs   # no view of the caller's processes
    assert obs["shm"] == [] and obs["run"] == []
    from dynacap.harness.launcher import _needed_paths      # the caller's home: only what the case needs
    kept = _needed_paths(str(tmp_path / "case"), {"case": {"root": str(tmp_path)}})
    for home, names in obs["homes"].items():
        for name in names:
            assert any(os.path.realpath(k).startswith(os.path.join(home, name)) for k in kept if k), (home, name)
    # Only the paths back to what the case needs (its folder; the checkout or interpreter when they are in /tmp).
    in_tmp = {os.path.relpath(os.path.realpath(k), "/tmp").split(os.sep)[0] for k in kept
              if k and os.path.realpath(k).startswith("/tmp" + os.sep)}
    assert set(obs["tmp"]) <= {tmp_path.parts[2]} | in_tmp, obs["tmp"]
    assert not os.path.exists(f"/dev/shm/{shm_name}")
    assert not _alive(DAEMON)                                     # killed with the namespace, setsid or not


def test_without_namespaces_the_launcher_kills_orphans_as_subreaper(tmp_path):
    rc, events, obs, err = _launch(tmp_path, f"""
daemon({DAEMON!r})
time.sleep(0.2)
observe(pid=os.getpid())
""", namespaces=False)
    assert rc == 0, err
    assert events[0]["namespaces"] == "unavailable" and events[0]["namespaces_note"] == "disabled"
    if not events[0]["subreaper"]:
        pytest.skip("no PR_SET_CHILD_SUBREAPER here")
    assert obs["info"]["pidns"] == "shared"
    assert not _alive(DAEMON)
    assert any(e.get("killed_leftovers") for e in events)


@pytest.mark.parametrize("namespaces", [True, False])
def test_the_launcher_ends_like_the_worker(tmp_path, namespaces):
    rc, events, _, _ = _launch(tmp_path, "os.kill(os.getpid(), signal.SIGSEGV)\n", namespaces=namespaces)
    assert rc == -11
    rc, _, _, _ = _launch(tmp_path / "b", "os._exit(3)\n", namespaces=namespaces)
    assert rc == 3


@pytest.mark.parametrize("namespaces", [True, False])
def test_writing_the_channel_out_of_protocol_kills_the_worker(tmp_path, namespaces):
    rc, events, _, _ = _launch(tmp_path, """
emit(event="start", phase="prepare")
emit(event="done", phase="prepare", result={"status": "ok"})
emit(event="start", phase="dynamo")
emit(event="done", phase="dynamo", result={"status": "ok"})     # forged: the case's own line...
emit(event="done", phase="dynacap", result={"status": "ok"})    # ...and one the worker never sends
time.sleep(30)
""", phases=("prepare", "dynamo", "dynacap"), namespaces=namespaces)
    assert rc == -9
    kinds = [e["event"] for e in events]
    assert kinds == ["launcher", "sandbox", "start", "done", "start", "done", "violation"], kinds
    assert "dynacap" in events[-1]["detail"]


def test_isolation_voids_the_result_before_a_violation(monkeypatch):
    """The last result the channel took before a violation may be the case's: not a pass."""
    from dynacap.harness import isolation
    from dynacap.harness.case import Case
    evs = [{"event": "sandbox", "sandbox": {}}, {"event": "start", "phase": "prepare"},
           {"event": "done", "phase": "prepare", "result": {"status": "ok", "recipe": {}}},
           {"event": "start", "phase": "dynamo"}, {"event": "done", "phase": "dynamo", "result": {"status": "ok"}},
           {"event": "violation", "detail": "result for 'dynacap' while None runs", "phase": None}]
    calls = []

    def fake_worker(case, phases, cfg, prepared, timeout_s):
        calls.append(phases)
        if len(calls) == 1:
            return {"events": evs, "rc": -9, "timed_out": False, "stderr": "", "stdout": ""}
        return {"events": [{"event": "sandbox", "sandbox": {}}, {"event": "start", "phase": "dynacap"},
                           {"event": "done", "phase": "dynacap", "result": {"status": "ok"}}],
                "rc": 0, "timed_out": False, "stderr": "", "stdout": ""}
    monkeypatch.setattr(isolation, "run_worker", fake_worker)
    rec = isolation.run_case(Case(id="x", project="p", root="/", qualname="X"),
                             {"compilers": ["dynamo", "dynacap"], "timeout_s": 10})
    assert rec["results"]["dynamo"]["status"] == "crash"
    assert "result channel" in rec["results"]["dynamo"]["error"]
    assert rec["results"]["dynacap"]["status"] == "ok" and calls[1] == ["dynacap"]


def test_isolation_checks_the_events_file_again(monkeypatch):
    """Without Landlock the case could append to the events file: the harness reads it by the protocol."""
    from dynacap.harness import isolation
    from dynacap.harness.case import Case
    forged = [{"event": "launcher"}, {"event": "sandbox", "sandbox": {}}, {"event": "start", "phase": "prepare"},
              {"event": "done", "phase": "prepare", "result": {"status": "ok", "recipe": {}}},
              {"event": "start", "phase": "dynamo"},
              {"event": "done", "phase": "dynamo", "result": {"status": "ok"}},        # appended by the case
              {"event": "done", "phase": "prepare", "result": {"status": "ok"}}]       # and this one too
    monkeypatch.setattr(isolation, "run_worker", lambda *a: {"events": forged, "rc": 0, "timed_out": False,
                                                            "stderr": "", "stdout": ""})
    rec = isolation.run_case(Case(id="x", project="p", root="/", qualname="X"),
                             {"compilers": ["dynamo"], "timeout_s": 10})
    assert rec["prepare"]["status"] == "ok"
    assert rec["results"]["dynamo"]["status"] == "crash" and "events file" in rec["results"]["dynamo"]["error"]


def test_pids_cgroup_limits_the_case_and_kills_what_is_left(tmp_path):
    group = cgroups.CaseGroup(20)
    if group.path is None:
        pytest.skip(f"no pids cgroup here: {group.note}")
    try:
        rc, events, obs, err = _launch(tmp_path, """
n = 0
for _ in range(60):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
observe(forked=n)
""", group=group, namespaces=False)
        assert rc == 0, err
        assert events[0]["cgroup"] == "joined"
        assert obs["forked"] < 20
    finally:
        group.close()
    assert not os.path.exists(group.path)
    # what a killed harness left behind goes with the next one
    parent = os.path.dirname(os.path.dirname(group.path))
    stale = os.path.join(parent, "dynacap-999999999")
    os.makedirs(os.path.join(stale, "case-0"))
    cgroups._sweep_stale(parent)
    assert not os.path.exists(stale)


# ----------------------------------------------------------------- what a run says about its sandbox
def test_protections_are_read_from_the_sandbox_report():
    full = {"pidns": "own", "proc": "own", "private": ["/tmp", "/dev/shm", "/run"], "cgroup": "pids.max 256",
            "landlock": "abi 7, tcp blocked, signals and abstract sockets scoped", "landlock_abi": 7,
            "netns": "isolated", "capabilities": "dropped", "nproc": 66, "nproc_note": "not enforced for root"}
    assert all(sandbox.protections(full).values())
    degraded = dict(full, pidns="shared", proc="shared", private=[], cgroup="unavailable", landlock_abi=5)
    missing = [k for k, on in sandbox.protections(degraded).items() if not on]
    assert missing == ["own PID namespace and /proc", "private /tmp and /dev/shm",
                       "every case process killed at the end", "process limit that holds for root",
                       "signals and abstract sockets scoped (Landlock 6)"]
    # a non-root worker: RLIMIT_NPROC holds without a cgroup
    assert sandbox.protections(dict(degraded, nproc_note=None))["process limit that holds for root"]
    recs = [{"id": "a", "sandbox": full}, {"id": "b", "sandbox": degraded}, {"id": "c"}]
    s = summary.sandbox_summary(recs)
    assert s["cases"] == 2 and s["active"]["own PID namespace and /proc"] == 1
    assert s["active"]["no capabilities"] == 2


def test_require_sandbox_refuses_to_run_without_a_protection(tmp_path):
    from dynacap.harness import CorpusOptions, run_corpus
    from dynacap.harness.api import SandboxIncomplete
    fixtures = os.path.join(REPO, "tests", "corpus_fixtures", "eager_fails")
    with pytest.raises(SandboxIncomplete, match="own PID namespace and /proc"):
        run_corpus(CorpusOptions(paths=[fixtures], out=str(tmp_path / "out"), compiler="dynamo",
                                 require_sandbox=True, namespaces=False, progress=False))
    assert not (tmp_path / "out" / "results.jsonl").exists()      # nothing ran


def test_require_sandbox_also_refuses_each_case(tmp_path):
    """A case whose sandbox lacks a protection is not run (its worker checks before any project code)."""
    from dynacap.harness import isolation
    from dynacap.harness.case import Case
    case = Case(id="e/broken.py::AlwaysRaises", project="e", qualname="AlwaysRaises", file="broken.py",
                root=os.path.join(REPO, "tests", "corpus_fixtures", "eager_fails"))
    rec = isolation.run_case(case, {"compilers": ["dynamo"], "timeout_s": 60, "require_sandbox": True,
                                    "namespaces": False, "fork_server": False, "seed": 0})
    assert rec["prepare"]["status"] == "crash" and "--require-sandbox" in rec["prepare"]["error"]
    assert "own PID namespace and /proc" in rec["prepare"]["error"]


# ----------------------------------------------------------------- progress, charts, report notes
def test_progress_line_fits_the_terminal_and_first_eta_waits_for_a_pace(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    p = progress.Progress(20, ["dynamo", "dynacap"], stream=open(os.devnull, "w"))
    p.columns = lambda: 60
    rec = {"id": "some/long/project/path/model.py::AVeryLongClassName",
           "results": {"dynamo": {"status": "ok"}, "dynacap": {"status": "compile_error"}}}
    clock[0] += 8.0                     # the first case also paid for the fork server's start
    p.update(rec)
    assert "ETA ?" in p.line()
    for _ in range(3):
        clock[0] += 0.5
        p.update(rec)
    assert "ETA 0:08" in p.line()       # 16 cases left at 0.5 s each, not 8 s each
    for st in ("crash", "timeout", "eager_error", "import_error", "wrong_result"):
        p.counts[f"dynamo:{st}"] += 1
    assert len(p.line("x" * 60)) <= 59


def test_chart_labels_sit_on_their_gridlines():
    import re
    for vmax in (1, 3, 7, 13, 26, 99, 1234):
        t = charts.ticks(vmax)
        assert t[0] == 0 and t[-1] >= vmax and all(isinstance(v, int) for v in t)
        assert len({b - a for a, b in zip(t, t[1:])}) == 1 and len(t) <= 6
    svg = charts.vbar(["0", "1", "2"], {"dynamo": [7, 3, 1]}, "t")
    labels = re.findall(r'<text x="36" y="([\d.]+)" text-anchor="end" fill="#666">([\d.]+)</text>'
                        r'<line x1="40" y1="([\d.]+)"', svg)
    assert [v for _, v, _ in labels] == ["0", "2", "4", "6", "8"]
    top, plot_h = 30, 230 - 40 - 30
    for y_text, v, y_line in labels:
        assert float(y_line) == pytest.approx(top + plot_h - plot_h * int(v) / 8, abs=0.06)
        assert float(y_text) == pytest.approx(float(y_line) + 4, abs=0.06)


def test_report_says_which_cases_ask_is_compiling():
    from dynacap.harness import discovery
    d = discovery.discover([os.path.join(REPO, "tests", "corpus_fixtures", "compiler_aware")])
    assert all(c.extra.get("checks_compiling") for c in d.cases) and d.cases
    recs = [{"id": "p/a.py::A", "project": "p", "checks_compiling": True, "prepare": {"status": "ok"},
             "results": {"dynacap": {"status": "ok"}, "dynamo": {"status": "wrong_result"}}},
            {"id": "p/b.py::B", "project": "p", "prepare": {"status": "ok"},
             "results": {"dynacap": {"status": "ok"}, "dynamo": {"status": "ok"}}}]
    s = summary.summarize(recs)
    md = render_md(recs, s, {"backend": "eager", "fullgraph": False})
    assert "1 case(s) ask torch.compiler.is_compiling()" in md and "1 of them have different statuses" in md
    assert "p/a.py::A" in md.split("is_compiling()")[1].split("\n")[0]
