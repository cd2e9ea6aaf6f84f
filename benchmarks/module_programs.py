"""Module programs in the style of crawled GitHub code: graphs and breaks, dynacap vs torch.compile, same run.

The programs are those of ``tests/test_module_programs.py`` (``PROGRAMS``).  For each one, a
fresh module (same seed) is run eagerly, under ``dynacap.explain`` and under torch.compile
(``torch._dynamo.explain`` for its breaks, ``torch.compile`` with a counting ``eager``
backend for its graphs and result; ``torch._dynamo.reset()`` before each; where explain lists
no break, ``fullgraph=True`` tells whether there is one it leaves out: a break before a frame's
first operation).  Both results are compared with eager's.  The ``scalar`` and ``dynamic``
groups run with ``capture_scalar_outputs`` and ``capture_dynamic_output_shape_ops`` on in both
engines.  Prints a markdown table, the totals, and each row where dynacap has more graphs or
breaks than torch.compile with both engines' break reasons; exits non-zero when a result
differs from eager.

Usage::

    PYTHONPATH=. python3 benchmarks/module_programs.py
    PYTHONPATH=. python3 benchmarks/module_programs.py normal_log_prob packed_lstm   # some programs
    PYTHONPATH=. python3 benchmarks/module_programs.py --known-breaks   # the test's KNOWN_BREAKS, as of now
"""
from __future__ import annotations

import pathlib
import re
import sys
import textwrap
import warnings

import torch
import torch._dynamo

import dynacap

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from differential import assert_same  # noqa: E402
from test_module_programs import PROGRAMS, Program, run_captured  # noqa: E402

SEED = 2


class Counting:
    """torch.compile backend that counts graphs and runs each as is."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def same(expected, actual) -> bool:
    try:
        assert_same(expected, actual)
    except AssertionError:
        return False
    return True


def seeded(call, args):
    torch.manual_seed(SEED)
    return call(*args)


def run_dynacap(prog: Program, expected) -> dict:
    model, args = prog.build()
    try:
        out = seeded(dynacap.explain(model), args)
    except Exception as e:  # reported in the table
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    return {"graphs": out.graph_count, "breaks": out.graph_break_count, "same": same(expected, out.result),
            "reasons": [r.reason.splitlines()[0] for r in out.break_reasons]}


def run_torch(prog: Program, expected) -> dict:
    try:
        torch._dynamo.reset()
        model, args = prog.build()
        explained = seeded(torch._dynamo.explain(model), args)
        torch._dynamo.reset()
        model, args = prog.build()
        backend = Counting()
        result = seeded(torch.compile(model, backend=backend), args)
    except Exception as e:  # reported in the table
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    finally:
        torch._dynamo.reset()
    reasons = [str(r.reason).splitlines()[0] for r in explained.break_reasons]
    if not reasons:
        # explain lists no break made before a frame's first graph operation (a frame it ran eagerly shows
        # as -1 breaks, `warnings.warn(...)` before the ops as none): fullgraph=True tells.
        hidden = fullgraph_error(prog)
        if hidden is not None:
            reasons = [hidden]
        elif explained.graph_count == 0:
            reasons = ["no graph and no reason given"]
    return {"graphs": backend.graphs, "breaks": len(reasons), "same": same(expected, result), "reasons": reasons}


def fullgraph_error(prog: Program) -> str | None:
    """Why torch.compile cannot capture the program in one graph: the error ``fullgraph=True`` raises (None: it can)."""
    model, args = prog.build()
    try:
        seeded(torch.compile(model, backend="eager", fullgraph=True), args)
    except Exception as e:  # the reason is its message
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        return " ".join(lines[:2])
    finally:
        torch._dynamo.reset()
    return None


def cell(run: dict) -> str:
    return "error" if "error" in run else f"{run['graphs']} / {run['breaks']}"


def one_graph(run: dict) -> bool:
    return "error" not in run and run["graphs"] == 1 and run["breaks"] == 0


def worse(ours: dict, theirs: dict) -> bool:
    """dynacap has more graphs or breaks than torch.compile on this row (or failed where it did not)."""
    if "error" in ours:
        return "error" not in theirs
    if "error" in theirs or one_graph(ours):  # one graph is never worse (torch.compile's 0 / 1 ran it eagerly)
        return False
    return ours["graphs"] > theirs["graphs"] or ours["breaks"] > theirs["breaks"]


def main(names: list[str]) -> int:
    rows = []
    for name in names or list(PROGRAMS):
        prog = PROGRAMS[name]
        with prog.settings(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the programs' own warnings and torch.compile's
            eager_model, args = prog.build()
            expected = seeded(eager_model, args)
            ours, theirs = run_dynacap(prog, expected), run_torch(prog, expected)
        rows.append((name, prog.group, ours, theirs))
        dynacap.reset()

    print("| program | group | dynacap graphs / breaks | torch.compile graphs / breaks "
          "| same result (dynacap / torch.compile) |")
    print("|---|---|---|---|---|")
    for name, group, ours, theirs in rows:
        sames = " / ".join("error" if "error" in r else ("yes" if r["same"] else "NO") for r in (ours, theirs))
        print(f"| {name} | {group} | {cell(ours)} | {cell(theirs)} | {sames} |")

    bad = [(n, o, t) for n, _, o, t in rows if worse(o, t)]
    wrong = [n for n, _, o, t in rows if any("error" not in r and not r["same"] for r in (o, t))]
    print()
    print(f"programs: {len(rows)}")
    print(f"captured in one graph: dynacap {sum(one_graph(o) for _, _, o, _ in rows)}, "
          f"torch.compile {sum(one_graph(t) for _, _, _, t in rows)}")
    print(f"graph breaks in total: dynacap {sum(o.get('breaks', 0) for _, _, o, _ in rows)}, "
          f"torch.compile {sum(t.get('breaks', 0) for _, _, _, t in rows)}")
    print(f"rows where dynacap > torch.compile: {len(bad)}")
    print(f"results different from eager: {', '.join(wrong) or 'none'}")
    if bad:
        print()
        print("## Rows where dynacap has more graphs or breaks than torch.compile")
        for name, ours, theirs in bad:
            print(f"- {name}: dynacap {cell(ours)}, torch.compile {cell(theirs)}")
            for reason in ours.get("reasons", [ours.get("error")]):
                print(f"  - dynacap: {reason}")
            for reason in theirs.get("reasons", []):
                print(f"  - torch.compile: {reason}")
    return 1 if wrong else 0


def print_known_breaks() -> None:
    """``KNOWN_BREAKS`` for the test module: each program that is not one graph under ``fullgraph=True``."""
    print("KNOWN_BREAKS: Dict[str, str] = {")
    for name, prog in PROGRAMS.items():
        dynacap.reset()
        try:
            with prog.settings(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graphs = run_captured(prog)
            if graphs == 1:
                continue
            reason = f"{graphs} graphs"
        except dynacap.Unsupported as e:
            reason = re.sub(r"^\S+\.py:\d+: ", "", str(e).splitlines()[0])  # without the user's file:line
        parts = textwrap.wrap(reason, 96, drop_whitespace=False)
        print(f'    "{name}":')
        for i, part in enumerate(parts):
            print(f"        {part!r}" + ("," if i == len(parts) - 1 else ""))
    print("}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--known-breaks"]:
        print_known_breaks()
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
