"""Construct programs (issue 8): one graph or not, dynacap vs torch.compile, same run.

The programs are those of ``tests/constructs/`` (``PROGRAMS``).  Each one runs eagerly, under
``dynacap.explain`` (graphs, breaks and their reasons, result) and under ``torch.compile`` with a
counting ``eager`` backend (graphs, result; its breaks from ``torch._dynamo.utils.counters``),
``torch._dynamo.reset()`` before each.  Both engines' results, inputs after the call and printed
text are compared with eager's.  Prints a markdown table per family (programs, captured in one
graph, results different from eager), the totals, the programs where dynacap breaks and
torch.compile does not (with dynacap's reason) and dynacap's most frequent break reasons; exits
non-zero when a result differs from eager.

Usage::

    PYTHONPATH=. python3 benchmarks/constructs.py
    PYTHONPATH=. python3 benchmarks/constructs.py closure_read partial_call   # some programs
    PYTHONPATH=. python3 benchmarks/constructs.py --known-breaks   # tests/constructs/known_breaks.py, as of now
"""
from __future__ import annotations

import collections
import pathlib
import re
import sys
import textwrap
import warnings

import torch
import torch._dynamo
import torch._dynamo.utils

import dynacap

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from constructs import BREAK_BY_DESIGN as BY_DESIGN, PROGRAMS, Construct  # noqa: E402
from differential import clone_inputs, compare_outcomes, run_once  # noqa: E402
from test_constructs import WRONG_RESULTS, InternalError, _plain_globals, _restore, run_captured  # noqa: E402

INTERNAL_ERROR = "dynacap: internal error"


class Counting:
    """torch.compile backend that counts graphs and runs each as is."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def first_line(text: str) -> str:
    """A reason's first line, without the user's ``file.py:line:`` prefix."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return re.sub(r"^\S+\.py:\d+: ", "", lines[0]) if lines else ""


def same(eager, outcome) -> bool:
    try:
        compare_outcomes(eager, outcome, "run")
    except Exception:  # noqa: BLE001 (any failure to compare is a difference)
        return False
    return True


def run(call, args, module_globals: dict | None = None, initial: dict | None = None):
    """One run on fresh inputs; with ``initial``, the module's globals are put back to it first."""
    if initial is not None:
        _restore(module_globals, initial)
    c_args, c_kwargs = clone_inputs((args, {}))
    return run_once(call, c_args, c_kwargs, capture_stdout=True)


def run_dynacap(prog: Construct, eager, initial: dict) -> dict:
    dynacap.reset()
    explained = dynacap.explain(prog.fn)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=INTERNAL_ERROR)
        outcome = run(explained, prog.build(), prog.fn.__globals__, initial)
    if isinstance(outcome.exception, UserWarning):
        return {"error": re.sub(r"^.*?; running it eagerly: ", "", first_line(outcome.exception))}
    out = outcome.result
    if outcome.exception is None:
        outcome.result = out.result
    return {"graphs": out.graph_count if outcome.exception is None else 0,
            "breaks": out.graph_break_count if outcome.exception is None else 0,
            "same": same(eager, outcome),
            "reasons": [first_line(r.reason) for r in out.break_reasons] if outcome.exception is None else []}


def run_torch(prog: Construct, eager, initial: dict) -> dict:
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    backend = Counting()
    try:
        outcome = run(torch.compile(prog.fn, backend=backend), prog.build(), prog.fn.__globals__, initial)
        breaks = dict(torch._dynamo.utils.counters["graph_break"])
    finally:
        torch._dynamo.reset()
    if outcome.exception is not None and eager.exception is None:
        return {"error": first_line(f"{type(outcome.exception).__name__}: {outcome.exception}")}
    return {"graphs": backend.graphs, "breaks": sum(breaks.values()), "same": same(eager, outcome),
            "reasons": [first_line(r) for r in breaks]}


def one_graph(r: dict) -> bool:
    return "error" not in r and r["graphs"] == 1 and r["breaks"] == 0


def wrong(r: dict) -> bool:
    return "error" not in r and not r["same"]


def main(names: list[str]) -> int:
    rows = []
    for name in names or list(PROGRAMS):
        prog = PROGRAMS[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.compile's own warnings
            initial = _plain_globals(prog.fn.__globals__)  # each engine starts from the globals eager saw
            eager = run(prog.fn, prog.build())
            ours, theirs = run_dynacap(prog, eager, initial), run_torch(prog, eager, initial)
            _restore(prog.fn.__globals__, initial)
        rows.append((prog, ours, theirs))
    dynacap.reset()

    families = collections.defaultdict(list)
    for row in rows:
        families[row[0].family].append(row)
    print("| family | programs | one graph: dynacap | one graph: torch.compile "
          "| wrong results: dynacap | wrong results: torch.compile |")
    print("|---|---|---|---|---|---|")
    meant_whole = [r for r in rows if r[0].family not in BY_DESIGN]
    totals = [("**total**", rows)] + ([(f"**total without {' and '.join(BY_DESIGN)}**", meant_whole)]
                                      if len(meant_whole) < len(rows) else [])
    for family, group in list(families.items()) + totals:
        print(f"| {family} | {len(group)} | {sum(one_graph(o) for _, o, _ in group)} "
              f"| {sum(one_graph(t) for _, _, t in group)} | {sum(wrong(o) for _, o, _ in group)} "
              f"| {sum(wrong(t) for _, _, t in group)} |")

    wrongs = [f"{p.name} ({'dynacap' if wrong(o) else ''}{' and ' if wrong(o) and wrong(t) else ''}"
              f"{'torch.compile' if wrong(t) else ''})" for p, o, t in rows if wrong(o) or wrong(t)]
    print()
    print(f"programs: {len(rows)}")
    print(f"captured in one graph: dynacap {sum(one_graph(o) for _, o, _ in rows)}, "
          f"torch.compile {sum(one_graph(t) for _, _, t in rows)}")
    print(f"graph breaks in total: dynacap {sum(o.get('breaks', 0) for _, o, _ in rows)}, "
          f"torch.compile {sum(t.get('breaks', 0) for _, _, t in rows)}")
    print(f"results different from eager: {', '.join(wrongs) or 'none'}")
    errors = [f"{p.name}: {o['error']}" for p, o, _ in rows if "error" in o]
    if errors:
        print(f"dynacap internal errors: {len(errors)}")
        for e in errors:
            print(f"- {e}")

    behind = [(p, o, t) for p, o, t in rows if not one_graph(o) and one_graph(t)]
    if behind:
        print()
        print(f"## Programs where dynacap breaks and torch.compile does not ({len(behind)})")
        for p, o, _ in behind:
            reasons = o.get("reasons") or [o.get("error") or f"{o['graphs']} graphs"]
            print(f"- {p.name} ({p.family}): {reasons[0]}")
    ahead = [p.name for p, o, t in rows if one_graph(o) and not one_graph(t)]
    if ahead:
        print()
        print(f"## Programs where torch.compile breaks and dynacap does not ({len(ahead)}): {', '.join(ahead)}")
    reasons = collections.Counter(generic(o["reasons"][0]) for p, o, _ in rows
                                  if o.get("reasons") and p.family not in BY_DESIGN)
    if reasons:
        print()
        print(f"## dynacap's most frequent break reasons (first break of each program, {' and '.join(BY_DESIGN)} "
              "left out)")
        for reason, n in reasons.most_common(20):
            print(f"- {n} x {reason}")
    return 1 if wrongs else 0


def generic(reason: str) -> str:
    """A reason with its numbers and quoted strings blanked, so that reasons of one kind count together."""
    return re.sub(r"\b\d+\b", "N", re.sub(r"'[^']*'", "…", reason))


def known_break(prog: Construct) -> str | None:
    """Why ``prog`` is not one graph under ``fullgraph=True`` (the test's xfail reason), or None."""
    dynacap.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graphs = run_captured(prog)
    except dynacap.Unsupported as e:
        return first_line(e)
    except InternalError as e:
        return "INTERNAL ERROR: " + re.sub(r"^.*?; running it eagerly: ", "", first_line(e))
    except AssertionError as e:
        return WRONG_RESULTS.get(prog.name) or f"WRONG RESULT: {first_line(e)}"
    return None if graphs == 1 else f"{graphs} graphs"


def print_known_breaks() -> None:
    """The module ``tests/constructs/known_breaks.py``: each program that is not one graph, with its reason."""
    print('"""KNOWN_BREAKS: programs dynacap does not capture in one graph today, with its reason.\n\n'
          'Generated by ``benchmarks/constructs.py --known-breaks`` (write it to a temporary file first:\n'
          'the benchmark imports this module).\n"""')
    print("from typing import Dict\n")
    print("KNOWN_BREAKS: Dict[str, str] = {")
    for name, prog in PROGRAMS.items():
        reason = None if prog.family in BY_DESIGN else known_break(prog)
        if reason is None:
            continue
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
