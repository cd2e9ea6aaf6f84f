"""Smoke test of benchmarks/overhead.py: a --quick run of one micro case exits 0 and prints the table.

Not a timed test: the figures of a --quick run are not checked, only that the
benchmark runs end to end (capture, correctness check against eager, Dynamo
side, explain counts, table, JSON).
"""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_overhead_benchmark_quick(tmp_path):
    out_json = tmp_path / "overhead.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--quick", "--cases", "one_op",
         "--json", str(out_json)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    header = next((l for l in lines if l.startswith("case ")), None)
    assert header is not None, proc.stdout
    for column in ("eager µs", "dynacap ovh µs", "Dynamo ovh µs", "ratio", "dynacap cap ms",
                   "Dynamo cap ms", "dynacap g/b", "Dynamo g/b"):
        assert column in header, (column, header)
    row = next((l for l in lines if l.startswith("one_op ")), None)
    assert row is not None, proc.stdout
    assert row.split()[-2:] == ["1/0", "1/0"], row  # one graph, no break, for both engines
    data = json.loads(out_json.read_text())
    (result,) = data["results"]
    assert result["case"] == "one_op" and result["dynacap_graphs"] == 1 and result["dynamo_graphs"] == 1
    assert data["meta"]["quick"] is True and not data["meta"]["failures"]
