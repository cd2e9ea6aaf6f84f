"""Builtins on user objects and frames by CPython's protocols: ``globals()``/``locals()``/``vars()``,
``abs``/``float``/``int``/``str``/``repr``/``callable``/``hash``/``id``, ``sorted``/``min``/``max``
over user ``__lt__``, iteration by ``__getitem__``, ``in`` falling back to iteration.

Each test is differential (eager vs captured: result, inputs, printed text, module globals after
the call) and checks the graph count where the program must be one graph.
"""
from __future__ import annotations

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_fully_captured, run_differential

WRITTEN = 0
SCALE = 3


@pytest.fixture(autouse=True)
def _fresh_globals():
    global WRITTEN
    WRITTEN = 0
    yield
    WRITTEN = 0


def _with_globals(fn, *args, fullgraph=False):
    """Eager, then captured, from the same WRITTEN: results and the global after each must match."""
    global WRITTEN
    WRITTEN = 0
    expected = fn(*args)
    expected_global = WRITTEN
    WRITTEN = 0
    backend = CountingBackend()
    got = dynacap.optimize(fn, backend=backend, fullgraph=fullgraph)(*args)
    torch.testing.assert_close(got, expected)
    assert WRITTEN == expected_global
    return backend.compiles


def test_globals_item_store_seen_by_a_later_global_read():
    def f(x):
        globals()["WRITTEN"] = 5
        return x * WRITTEN

    assert _with_globals(f, torch.randn(4), fullgraph=True) == 1


def test_globals_dict_kept_across_a_break_stores_into_the_module():
    # The dict reaches the resume function as an argument: a store into it is a global store.
    def f(x):
        g = globals()
        n = int(x.sum() > 100)  # a break: a tensor's value read into Python
        g["WRITTEN"] = 7 + n
        return x * WRITTEN

    assert _with_globals(f, torch.randn(4)) == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_globals_reads_get_and_in(backend):
    def f(x):
        g = globals()
        return x * g["SCALE"] + g.get("MISSING_NAME", 1) + ("SCALE" in g) + ("NOPE" in g)

    assert_fully_captured(f, torch.randn(4))
    run_differential(f, torch.randn(4), backend=CountingBackend(backend))


def test_globals_missing_key_raises_keyerror_like_eager():
    def f(x):
        try:
            return globals()["NO_SUCH_GLOBAL"]
        except KeyError as e:
            return x + len(str(e))

    assert_fully_captured(f, torch.randn(4))


def test_globals_read_after_the_guarded_value_changes():
    def f(x):
        return x * globals()["SCALE"]

    global SCALE
    compiled = dynacap.optimize(f, backend="eager")
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), x * 3)
    SCALE = 4
    try:
        torch.testing.assert_close(compiled(x), x * 4)
    finally:
        SCALE = 3


def test_locals_and_vars_without_arguments():
    def f(x):
        a, b = 1, 2
        names = sorted(k for k in vars() if k in ("a", "b", "x"))
        seen = locals()
        c = 3
        later = "c" in seen
        again = "c" in locals()
        return x * (a + b + seen["a"]), names, later, again

    assert_fully_captured(f, torch.randn(4))
    run_differential(f, torch.randn(4))
