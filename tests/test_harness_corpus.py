"""End-to-end tests of `dynacap corpus` over the fixture corpus (runs worker subprocesses).

The fast tests use torch.compile (Dynamo) as the compiler so that they do not
depend on the state of the capture engine; the dynacap side-by-side run over
the whole fixture corpus is marked slow (`pytest -m slow`).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from dynacap.harness import CorpusOptions, run_corpus
from dynacap.harness.results import read_records

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "corpus_fixtures")
REPO = os.path.dirname(HERE)

EXPECTED = {
    "srclayout_relative/src/tinynet/model.py::TinyNet": "ok",
    "srclayout_relative/src/tinynet/layers/base.py::Backbone": "ok",
    "ctor_args/ctor_models/mlp.py::MLP": "ok",
    "ctor_args/ctor_models/mlp.py::ConfigNet": "ok",
    "ctor_args/ctor_models/mlp.py::MultiKernel": "ok",
    "input_shapes/mnist.py::MnistNet": "ok",
    "input_shapes/text.py::TokenClassifier": "ok",
    "input_shapes/text.py::SeqEncoder": "ok",
    "missing_dep/model.py::StillWorks": "ok",
    "missing_dep/model.py::NeedsTheLibrary": "eager_error",
    "data_dependent/gates.py::GatedNet": "ok",
    "data_dependent/gates.py::ItemLoop": "ok",
    "eager_fails/broken.py::AlwaysRaises": "eager_error",
    "eager_fails/broken.py::CtorRaises": "eager_error",
    "import_fails/gpu_only.py::NeverLoads": "import_error",
    "hangs/sleeper.py::Sleeper": "timeout",
    "crashes/segv.py::Segfaulter": "crash",
    "crashes/exits.py::HardExit": "crash",
    "crashes/exits.py::SoftExit": "crash",
    "function_entry/fnlib/ops.py::gelu_residual": "ok",
    "function_entry/fnlib/ops.py::normalize_rows": "ok",
    "nondeterministic/counter.py::CallCounter": "nondeterministic",
    "nondeterministic/counter.py::ClockNoise": "nondeterministic",
    # Dynamo says it is compiling while it traces: a different result, an exit
    "compiler_aware/aware.py::CompileAware": "wrong_result",
    "compiler_aware/aware.py::ExitWhenCompiled": "crash",
    # hostile probes (issue 14): statuses that do not depend on the sandbox; what they
    # reached is checked outside (test_hostile_probes_reach_nothing)
    "hostile/snoop.py::EnvSnoop": "eager_error",
    "hostile/persist.py::LeaveFiles": "ok",
    "hostile/daemon.py::Daemonize": "ok",
    "hostile/reach.py::ReachCaller": "ok",
    "hostile/forkbomb.py::ForkBomb": "eager_error",
    "hostile/forge.py::ForgeResults": "crash",        # forges results when is_compiling()
}
#: cases whose dynacap status depends on the capture engine, not on the harness
ENGINE_DEPENDENT = {"compiler_aware/aware.py::CompileAware", "compiler_aware/aware.py::ExitWhenCompiled",
                    "hostile/forge.py::ForgeResults"}
#: a secret in the caller's environment during the fixture run: it must reach no output
SECRET = "dcprobe-SECRET-value-7f3a"
#: cheap cases for the resume and Dask runs; the 4th (a 3 s hang) keeps a
#: one-job run busy long enough to be killed after three finished cases
QUICK = ["crashes/exits.py::HardExit", "crashes/segv.py::Segfaulter", "eager_fails/broken.py::CtorRaises",
         "hangs/sleeper.py::Sleeper", "import_fails/gpu_only.py::NeverLoads",
         "nondeterministic/counter.py::CallCounter", "missing_dep/model.py::NeedsTheLibrary",
         "function_entry/fnlib/ops.py::gelu_residual", "crashes/exits.py::SoftExit"]


def _statuses(out_dir, compiler):
    return {r["id"]: r["results"][compiler]["status"] for r in read_records(os.path.join(out_dir, "results.jsonl"))}


def _quick_manifest(path):
    """A manifest naming the QUICK fixture cases explicitly."""
    lines = []
    for cid in QUICK:
        project, rest = cid.split("/", 1)
        file, qual = rest.split("::")
        entry = {"project": project, "root": os.path.join(FIXTURES, project), "file": file, "id": cid}
        entry["function" if project == "function_entry" else "class"] = qual
        if qual == "gelu_residual":
            entry["args"] = [{"tensor": [4, 8]}, {"tensor": [4, 8]}]
        if qual == "Sleeper":
            entry["timeout"] = 3
        lines.append(json.dumps(entry))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _left_files() -> set[str]:
    return {f for f in os.listdir("/dev/shm") + os.listdir("/tmp") if f.startswith("dynacap-probe-left-")}


class CallerTraps:
    """What a hostile case could reach of its callers: UNIX listeners (abstract and in /tmp,
    named so that the probe finds them) and a SIGURG handler in the test process."""

    def __enter__(self):
        tag = f"dynacap-probe-{os.getpid()}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + tag)
        self.path = f"/tmp/{tag}.sock"
        self.pathname = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.pathname.bind(self.path)
        for s in (self.abstract, self.pathname):
            s.listen(16)
            s.setblocking(False)
        self.left_before = _left_files()
        self.signals = []
        self.old_handler = signal.signal(signal.SIGURG, lambda *a: self.signals.append(time.time()))
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGURG, self.old_handler)
        self.connections = 0
        for s in (self.abstract, self.pathname):
            while True:
                try:
                    s.accept()[0].close()
                    self.connections += 1
                except BlockingIOError:
                    break
            s.close()
        os.unlink(self.path)


@pytest.fixture(scope="module")
def dynamo_run(tmp_path_factory):
    """The fixture corpus under Dynamo, run by the CLI with a secret in its environment
    (a variable set in-process would not show in /proc/<pid>/environ)."""
    out = tmp_path_factory.mktemp("fixtures-dynamo")
    with CallerTraps() as traps:
        r = subprocess.run([sys.executable, "-m", "dynacap", "corpus", FIXTURES, "--compiler", "dynamo",
                            "--jobs", "2", "--timeout", "90", "--repeat", "2", "--no-progress", "--out", str(out)],
                           cwd=REPO, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, DYNACAP_PROBE_SECRET=SECRET))
    assert r.returncode == 0, r.stderr[-3000:]
    return out, json.loads((out / "run.json").read_text()), traps


def test_every_fixture_case_gets_its_status(dynamo_run):
    out, meta, _ = dynamo_run
    got = _statuses(out, "dynamo")
    assert got == EXPECTED
    assert meta["executed"] == len(EXPECTED) and meta["skipped_finished"] == 0
    assert os.path.getsize(out / "report.html") > 2000 and (out / "report.md").exists()


def test_fixture_details(dynamo_run):
    out, _, _ = dynamo_run
    recs = {r["id"]: r for r in read_records(os.path.join(out, "results.jsonl"))}
    stub = recs["missing_dep/model.py::StillWorks"]["prepare"]["stubbed_imports"]
    assert stub == ["fancy_third_party_lib", "another_missing_pkg"]
    assert recs["input_shapes/mnist.py::MnistNet"]["prepare"]["inputs"] == ["float32[2, 1, 28, 28]"]
    assert recs["input_shapes/text.py::TokenClassifier"]["prepare"]["inputs"][0].startswith("int64")
    gated = recs["data_dependent/gates.py::GatedNet"]["results"]["dynamo"]
    assert gated["graph_break_count"] >= 1 and gated["graph_count"] >= 2
    assert gated["break_reasons"][0]["location"].endswith("gates.py:11")
    mlp = recs["ctor_args/ctor_models/mlp.py::MLP"]["results"]["dynamo"]
    for key in ("first_call_s", "median_s", "eager_median_s", "max_error", "op_count"):
        assert key in mlp, key
    assert mlp["graph_count"] == 1 and mlp["graph_break_count"] == 0 and mlp["max_error"] == 0
    assert "SIGSEGV" in recs["crashes/segv.py::Segfaulter"]["results"]["dynamo"]["error"]
    assert "sys.exit(2)" in recs["crashes/exits.py::SoftExit"]["results"]["dynamo"]["error"]
    assert "RuntimeError" in recs["import_fails/gpu_only.py::NeverLoads"]["prepare"]["error"]
    aware = recs["compiler_aware/aware.py::CompileAware"]["results"]["dynamo"]
    assert aware["max_error"] == pytest.approx(99, rel=1e-5) and "differs from eager" in aware["error"]
    exited = recs["compiler_aware/aware.py::ExitWhenCompiled"]
    assert exited["prepare"]["status"] == "ok"                   # eager was fine
    assert "exit code 9" in exited["results"]["dynamo"]["error"]
    sb = recs["ctor_args/ctor_models/mlp.py::MLP"]["sandbox"]
    assert sb["core"] == 0 and sb["as_mb"] == 4096


def test_resume_after_kill(tmp_path):
    manifest = _quick_manifest(tmp_path / "quick.jsonl")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "dynacap", "corpus", manifest, "--compiler", "dynamo", "--out", str(out),
           "--jobs", "1", "--timeout", "60", "--repeat", "1"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    results_file = out / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if results_file.exists() and len(read_records(str(results_file))) >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)          # the harness dies mid-run, no clean-up
    proc.wait()
    first = {r["id"]: r for r in read_records(str(results_file))}
    assert 3 <= len(first) < len(QUICK), "the run was not killed midway"
    time.sleep(0.5)
    r2 = subprocess.run(cmd + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert f"resume: {len(first)} finished cases kept, {len(QUICK) - len(first)} to run" in r2.stderr
    final = {r["id"]: r for r in read_records(str(results_file))}
    assert set(final) == set(QUICK)
    for cid, rec in first.items():               # finished cases were not redone
        assert final[cid]["run_id"] == rec["run_id"] and final[cid]["started"] == rec["started"]
    later = {final[c]["run_id"] for c in final if c not in first}
    assert len(later) == 1 and later != {next(iter(first.values()))["run_id"]}
    meta = json.loads((out / "run.json").read_text())
    assert meta["executed"] == len(QUICK) - len(first) and meta["skipped_finished"] == len(first)
    assert {c: final[c]["results"]["dynamo"]["status"] for c in final} == {c: EXPECTED[c] for c in QUICK}
    # a third run has nothing left to do
    r3 = subprocess.run(cmd + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert f"resume: {len(QUICK)} finished cases kept, 0 to run" in r3.stderr


def test_dask_local_cluster_gives_same_statuses(tmp_path):
    distributed = pytest.importorskip("distributed")
    manifest = _quick_manifest(tmp_path / "quick.jsonl")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    try:
        res = run_corpus(CorpusOptions(paths=[manifest], out=str(tmp_path / "dask"), compiler="dynamo",
                                       timeout=60, repeat=1, progress=False,
                                       scheduler=cluster.scheduler_address))
    finally:
        cluster.close()
    assert res.executed == len(QUICK)
    assert _statuses(tmp_path / "dask", "dynamo") == {c: EXPECTED[c] for c in QUICK}
    assert (tmp_path / "dask" / "report.html").exists()


def test_sandbox_confines_the_case(tmp_path, monkeypatch):
    proj = tmp_path / "probe"
    proj.mkdir()
    (proj / "probe.py").write_text(
        "import os, torch\nimport torch.nn as nn\n"
        "class Probe(nn.Module):\n"
        "    def forward(self, x):\n"
        "        leaked = [k for k in os.environ if 'TOKEN' in k or 'SECRET' in k]\n"
        "        wrote = []\n"
        "        for target in (os.path.join(os.path.dirname(__file__), 'pwned.txt'), os.environ['OUT_PROBE']):\n"
        "            try:\n"
        "                open(target, 'w').write('x'); wrote.append(target)\n"
        "            except OSError:\n"
        "                pass\n"
        "        open('scratch.txt', 'w').write('fine')          # its own scratch folder\n"
        "        if leaked or wrote:\n"
        "            raise RuntimeError(f'leaked={leaked} wrote={wrote}')\n"
        "        return x + 1\n")
    out = tmp_path / "out"
    monkeypatch.setenv("DYNACAP_TEST_SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("OUT_PROBE", str(out / "pwned.txt"))   # scrubbed: the probe must not see it
    (proj / "dynacap_cases.jsonl").write_text(json.dumps({"file": "probe.py", "class": "Probe",
                                                          "args": [{"tensor": [2]}]}) + "\n")
    # give the probe the output path through its code instead of the environment
    src = (proj / "probe.py").read_text().replace("os.environ['OUT_PROBE']", repr(str(out / "pwned.txt")))
    (proj / "probe.py").write_text(src)
    run_corpus(CorpusOptions(paths=[str(proj)], out=str(out), compiler="dynamo", timeout=60, repeat=1,
                             progress=False))
    rec = read_records(str(out / "results.jsonl"))[0]
    sb = rec["sandbox"]
    if not str(sb.get("landlock", "")).startswith("abi"):
        pytest.skip(f"no Landlock on this kernel: {sb}")
    assert rec["results"]["dynamo"]["status"] == "ok", rec["prepare"].get("error")
    assert not (proj / "pwned.txt").exists() and not (out / "pwned.txt").exists()


def _processes_named(name: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == name:
                    out.append(int(pid))
        except OSError:
            pass
    return out


def _need(sb: dict, *names: str) -> None:
    from dynacap.harness.sandbox import protections
    have = protections(sb)
    missing = [n for n in names if not have[n]]
    if missing:
        pytest.skip(f"not on this machine: {', '.join(missing)}")


def _probe(dynamo_run, case):
    out, _, traps = dynamo_run
    recs = {r["id"]: r for r in read_records(os.path.join(out, "results.jsonl"))}
    return out, traps, recs[f"hostile/{case}"], recs["hostile/snoop.py::EnvSnoop"]["sandbox"]


# The must-show of issue 14, over the probe run (the fixture corpus includes tests/corpus_fixtures/hostile)
def test_probe_secret_of_the_caller_reaches_no_output(dynamo_run):
    out, _, rec, sb = _probe(dynamo_run, "snoop.py::EnvSnoop")
    _need(sb, "own PID namespace and /proc")
    assert rec["prepare"]["error"].startswith("forward: RuntimeError: secrets seen: []"), rec["prepare"]["error"]
    for name in os.listdir(out):
        assert SECRET not in (out / name).read_text(errors="replace"), name


def test_probe_no_case_process_outlives_the_run(dynamo_run):
    _, _, rec, sb = _probe(dynamo_run, "daemon.py::Daemonize")
    _need(sb, "every case process killed at the end")
    assert rec["results"]["dynamo"]["status"] == "ok"          # the daemon was started
    assert not _processes_named("dcprobe-daemon")


def test_probe_forged_results_are_not_a_pass(dynamo_run):
    _, _, rec, sb = _probe(dynamo_run, "forge.py::ForgeResults")
    _need(sb, "writes only in scratch (Landlock)")
    forged = rec["results"]["dynamo"]
    assert forged["status"] == "crash" and "result channel" in forged["error"], forged
    assert rec["prepare"]["status"] == "ok"


def test_probe_leaves_nothing_in_dev_shm(dynamo_run):
    _, traps, rec, sb = _probe(dynamo_run, "persist.py::LeaveFiles")
    _need(sb, "private /tmp and /dev/shm")
    assert rec["results"]["dynamo"]["status"] == "ok"
    assert _left_files() <= traps.left_before


def test_probe_reaches_no_socket_and_signals_nothing_of_the_caller(dynamo_run):
    _, traps, rec, sb = _probe(dynamo_run, "reach.py::ReachCaller")
    _need(sb, "private /tmp and /dev/shm", "own PID namespace and /proc", "no network (network namespace)",
          "signals and abstract sockets scoped (Landlock 6)")
    assert rec["results"]["dynamo"]["status"] == "ok"
    assert traps.connections == 0 and traps.signals == []
    assert not os.path.exists(os.path.join(FIXTURES, "hostile", "planted.sock"))


def test_probe_fork_bomb_meets_the_process_limit(dynamo_run):
    _, _, rec, sb = _probe(dynamo_run, "forkbomb.py::ForkBomb")
    _need(sb, "process limit that holds for root")
    err = rec["prepare"]["error"]
    assert int(err.split("forked ")[1].split()[0]) < 256, err


@pytest.mark.slow
def test_cli_both_compilers_over_fixtures(tmp_path):
    """The must-show run: both compilers side by side over every fixture case."""
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "dynacap", "corpus", FIXTURES, "--compiler", "both",
                        "--out", str(out), "--jobs", "2"], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    recs = {x["id"]: x for x in read_records(str(out / "results.jsonl"))}
    assert {c: recs[c]["results"]["dynamo"]["status"] for c in recs} == EXPECTED
    for cid, exp in EXPECTED.items():
        got = recs[cid]["results"]["dynacap"]["status"]
        if cid in ENGINE_DEPENDENT:
            assert got in ("ok", "wrong_result", "compile_error", "crash"), (cid, got)
        elif exp == "ok":     # the harness reached the capture engine; its verdict is the engine's
            assert got in ("ok", "wrong_result", "compile_error"), (cid, got)
        else:
            assert got == exp, (cid, got)
    # Dynamo took the worker down; dynacap then ran in a fresh worker
    exited = recs["compiler_aware/aware.py::ExitWhenCompiled"]
    assert exited["workers"] == 2 and exited["results"]["dynacap"].get("phase_s") is not None
    md = (out / "report.md").read_text()
    assert "## Side by side: dynacap vs dynamo" in md
    assert "<svg" in (out / "report.html").read_text()


@pytest.mark.slow
def test_fullgraph_turns_breaks_into_compile_errors(tmp_path):
    out = tmp_path / "out"
    run_corpus(CorpusOptions(paths=[os.path.join(FIXTURES, "data_dependent")], out=str(out), compiler="dynamo",
                             fullgraph=True, timeout=90, repeat=1, progress=False))
    assert set(_statuses(out, "dynamo").values()) == {"compile_error"}
