"""Construct programs (issue 8 must-show): each one Python construct around tensor ops, one graph under fullgraph.

The programs live in ``tests/constructs/`` by family (object model, dunders, records, builtins,
standard library, exceptions, control flow, state, semantic corners, iteration, handlers,
protocols).  ``test_construct`` runs a program eagerly and twice under
``dynacap.optimize(fn, fullgraph=True)`` with a counting eager backend (fresh inputs each run)
and compares results, inputs after the call, printed text, raised exceptions
(``tests/differential.py``) and the module's globals; the capture must be exactly one graph.
A program with other inputs is then called with them: the guards must tell them apart.

Programs dynacap does not capture in one graph today are in ``constructs/known_breaks.py`` with
the reason it gives, as strict xfails: each turns into a failure the day it is captured, so the
table is regenerated (``benchmarks/constructs.py --known-breaks``).  A result different from
eager is never a known break; such an entry's reason starts with "WRONG RESULT:".
``test_construct_breaks_keep_result`` runs every program that breaks (the known breaks and the
families that break by design, ``BREAK_BY_DESIGN``) with its breaks resumed: every observable
must still be eager's.  ``benchmarks/constructs.py`` runs the programs under torch.compile too.
"""
import copy
import re
import warnings

import pytest

import dynacap
from constructs import BREAK_BY_DESIGN, PROGRAMS, Construct
from constructs.known_breaks import KNOWN_BREAKS
from differential import CountingBackend, assert_same, compare_outcomes, run_once

INTERNAL_ERROR = "dynacap: internal error"

#: Wrong results under fullgraph (also in /work/coord/requests-constructs.md), written by hand: the
#: generated table gives these reasons to the programs instead of the bare assertion message.  The
#: first found (`==` on objects made in the trace, a dict grown while iterated, islice pulling one
#: item too many, container equality) were fixed in the session that found them.
WRONG_RESULTS: dict = {}


class InternalError(AssertionError):
    """The capture failed inside dynacap (its 'internal error' warning): a bug, never a break."""


def run_captured(prog: Construct, backend=None, fullgraph=True) -> int:
    """Eager and two fullgraph dynacap runs of ``prog``; every observable must match. Returns the graph count.

    Each run gets fresh inputs (``prog.build()``: user objects too) and starts from the same
    globals of the program's module; a program with other inputs is then called with them once
    (its graph count is that of the first two calls).  ``fullgraph=False``: breaks are resumed,
    only the observables are checked.  Raises ``dynacap.Unsupported`` when dynacap cannot capture
    the program in one graph and ``InternalError`` when capture failed inside dynacap.
    """
    counting = CountingBackend(backend)
    compiled = dynacap.optimize(prog.fn, backend=counting, fullgraph=fullgraph)
    module_globals = prog.fn.__globals__
    initial = _plain_globals(module_globals)
    for call in range(2):
        eager = run_once(prog.fn, prog.build(), {}, capture_stdout=True)
        e_globals = _plain_globals(module_globals)
        _restore(module_globals, initial)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=INTERNAL_ERROR)
            captured = run_once(compiled, prog.build(), {}, capture_stdout=True)
        c_globals = _plain_globals(module_globals)
        _restore(module_globals, initial)
        error = captured.exception
        if isinstance(error, dynacap.Unsupported):
            raise error
        if isinstance(error, UserWarning) and str(error).startswith(INTERNAL_ERROR):
            raise InternalError(str(error))
        compare_outcomes(eager, captured, f"call {call}")
        assert_same(e_globals, c_globals, f"call {call}: module globals after the call")
    graphs = counting.compiles
    if prog.other is not None:
        eager = run_once(prog.fn, prog.build(other=True), {}, capture_stdout=True)
        _restore(module_globals, initial)
        captured = run_once(compiled, prog.build(other=True), {}, capture_stdout=True)
        _restore(module_globals, initial)
        compare_outcomes(eager, captured, "call with the other inputs")
    return graphs


def _plain_globals(module_globals: dict) -> dict:
    """Copies of the module's globals that a program may write: numbers, strings, lists, dicts, tuples."""
    return {k: copy.deepcopy(v) for k, v in module_globals.items()
            if type(v) in PLAIN and not k.startswith("__")}


def _restore(module_globals: dict, saved: dict) -> None:
    """Put the saved globals back; lists and dicts in place (their identity may be guarded)."""
    for k in [k for k in module_globals
              if type(module_globals[k]) in PLAIN and not k.startswith("__") and k not in saved]:
        del module_globals[k]
    for k, v in saved.items():
        current = module_globals.get(k)
        if type(current) is list and type(v) is list:
            current[:] = copy.deepcopy(v)
        elif type(current) is dict and type(v) is dict:
            current.clear()
            current.update(copy.deepcopy(v))
        else:
            module_globals[k] = copy.deepcopy(v)


PLAIN = (int, float, str, bool, list, dict, tuple)


def _param(name):
    reason = KNOWN_BREAKS.get(name)
    if reason is None:
        return pytest.param(name, id=name)
    # raises=: a known break must fail as a break (fullgraph's Unsupported), never as a wrong result.
    if reason.startswith("WRONG RESULT:"):
        raises = AssertionError
    elif reason.startswith("INTERNAL ERROR:"):
        raises = InternalError
    elif re.fullmatch(r"\d+ graphs", reason):
        raises = AssertionError
    else:
        raises = dynacap.Unsupported
    return pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, raises=raises, reason=reason))


@pytest.mark.parametrize("name", [_param(n) for n, p in PROGRAMS.items() if p.family not in BREAK_BY_DESIGN])
def test_construct(name):
    assert run_captured(PROGRAMS[name]) == 1


#: Known breaks whose program, run with its breaks (no fullgraph), gives another result than eager
#: (or fails inside dynacap).
WRONG_WITH_BREAKS: dict = {}


def _break_param(name):
    reason = WRONG_WITH_BREAKS.get(name)
    marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
    return pytest.param(name, id=name, marks=marks)


def _breaks(name: str) -> bool:
    """The program breaks (a known break of its own, or its family's purpose)."""
    if PROGRAMS[name].family in BREAK_BY_DESIGN:
        return True
    return name in KNOWN_BREAKS and not KNOWN_BREAKS[name].startswith(("WRONG", "INTERNAL"))


@pytest.mark.parametrize("name", [_break_param(n) for n in PROGRAMS if _breaks(n)])
def test_construct_breaks_keep_result(name):
    """A program dynacap breaks on, run with its breaks resumed: every observable is eager's."""
    run_captured(PROGRAMS[name], fullgraph=False)


def test_enough_programs():
    assert sum(p.family not in BREAK_BY_DESIGN for p in PROGRAMS.values()) >= 200
    assert set(KNOWN_BREAKS) <= set(PROGRAMS) and all(_breaks(n) for n in WRONG_WITH_BREAKS)


def test_benchmark_table(capsys):
    """``benchmarks/constructs.py`` on two programs: a row per family, totals, no wrong result."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "constructs.py"
    spec = importlib.util.spec_from_file_location("constructs_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["new_object_method", "closure_read"]) == 0
    out = capsys.readouterr().out
    assert "| objects | 1 | 1 | 1 | 0 | 0 |" in out and "| control | 1 | 1 | 1 | 0 | 0 |" in out, out
    assert "programs: 2" in out and "results different from eager: none" in out, out
