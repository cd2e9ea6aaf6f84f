"""Semantics at the frame hook: trace/profile functions, cache keys per capture context, interrupts.

Each test compares against eager.  Scenarios that could hang or abort the
process (a captured tracer, Ctrl-C in the middle of a capture) run in a
subprocess under a timeout, which prints one JSON line of what it saw.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import dynacap
from dynacap import _C
from differential import CountingBackend

REPO = pathlib.Path(__file__).resolve().parents[1]


def run_script(source: str, timeout: float = 120) -> dict:
    """Run ``source`` in a fresh interpreter; its last stdout line is JSON, returned parsed."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("DYNACAP_LOGS", None)
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the scenario did not finish within {timeout} s")
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- item 13: trace and profile functions are never captured -------------------------------

_TRACER_SCENARIO = """
    import json, sys, torch, dynacap

    events = []      # the tracer's own state: a global list that grows on every event

    def tracer(frame, event, arg):
        events.append((frame.f_code.co_name, event, arg.tolist() if isinstance(arg, torch.Tensor) else None))
        return tracer

    def helper(y):
        return y * 2

    def user_fn(x):
        y = x + 1
        return helper(y) - x

    x = torch.arange(4.0)
    install = sys.{install}
    report = {{}}
    for label, fn in (("eager", user_fn), ("captured", dynacap.optimize(user_fn, backend="{backend}"))):
        runs = []
        for _ in range(3):
            events.clear()
            install(tracer)
            try:
                result = fn(x)
            finally:
                install(None)
            seen = [e[1:] for e in events if e[0] == "user_fn" and e[1] in ("call", "return")]
            runs.append({{"result": result.tolist(), "events": seen}})
        report[label] = runs
    print(json.dumps(report))
"""


@pytest.mark.parametrize("install", ["settrace", "setprofile"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_trace_and_profile_functions_are_not_captured(install, backend):
    report = run_script(_TRACER_SCENARIO.format(install=install, backend=backend), timeout=90)
    assert report["captured"] == report["eager"]
    # The tracer saw the user's function start and return its result, on every call.
    assert report["eager"][0]["events"][0] == ["call", None]
    assert report["eager"][0]["events"][-1][0] == "return"


# -- item 14: cache entries are keyed by backend and options ---------------------------------

def sin_cos(x):
    return torch.sin(x) + torch.cos(x) * 2


def with_break(x, log):
    y = torch.relu(x) + 1
    log.append(y.sum().item())  # a graph break: .item() on a graph value
    return helper_after_break(y)


def helper_after_break(y):
    return y * 3 - 1


def offset_backend(offset):
    """A backend whose graphs add ``offset`` to every output: it shows which backend's graph ran."""
    counting = CountingBackend()

    def backend(gm, example_inputs):
        run = counting(gm, example_inputs)
        return lambda *args: tuple(out + offset for out in run(*args))

    backend.counting = counting
    return backend


def test_another_backend_compiles_its_own_graph():
    x = torch.randn(5)
    plus_one, plus_ten = offset_backend(1.0), offset_backend(10.0)
    torch.testing.assert_close(dynacap.optimize(sin_cos, backend=plus_one)(x), sin_cos(x) + 1.0)
    torch.testing.assert_close(dynacap.optimize(sin_cos, backend=plus_ten)(x), sin_cos(x) + 10.0)
    # and back: each backend keeps hitting its own entry
    torch.testing.assert_close(dynacap.optimize(sin_cos, backend=plus_one)(x), sin_cos(x) + 1.0)
    assert (plus_one.counting.compiles, plus_ten.counting.compiles) == (1, 1)
    assert (plus_one.counting.runs, plus_ten.counting.runs) == (2, 1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_wrappers_with_the_same_backend_and_options_share_entries(backend):
    x = torch.randn(5)
    expected = sin_cos(x)
    for _ in range(3):
        torch.testing.assert_close(dynacap.optimize(sin_cos, backend=backend)(x), expected)
    assert len(_C.cache_entries(sin_cos.__code__)) == 1
    for model in (Scaled(), torch.nn.Linear(5, 2)):  # a user forward; torch's own forward
        torch.testing.assert_close(dynacap.optimize(model, backend=backend)(x), model(x))
        before = _C.cache_stats()["callback_calls"]
        for _ in range(2):
            torch.testing.assert_close(dynacap.optimize(model, backend=backend)(x), model(x))
        assert _C.cache_stats()["callback_calls"] == before, f"a new {type(model).__name__} wrapper recompiled"


class Scaled(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 3


def test_one_counting_backend_object_is_one_key():
    backend = CountingBackend()
    x = torch.randn(5)
    for _ in range(3):
        dynacap.optimize(sin_cos, backend=backend)(x)
    assert backend.compiles == 1 and backend.runs == 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fullgraph_is_part_of_the_key(backend):
    x = torch.randn(4)
    log_eager, log_captured = [], []
    expected = with_break(x, log_eager)
    # A break is fine without fullgraph ...
    torch.testing.assert_close(dynacap.optimize(with_break, backend=backend)(x, log_captured), expected)
    # ... and an error with it, even though the frame is in the cache now
    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(with_break, backend=backend, fullgraph=True)(x, [])
    # and the fullgraph error marked nothing for the other context
    torch.testing.assert_close(dynacap.optimize(with_break, backend=backend)(x, log_captured), expected)
    assert log_captured == log_eager * 2


def test_fullgraph_error_first_does_not_affect_a_later_plain_wrapper():
    x = torch.randn(4)
    backend = CountingBackend()
    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(with_break, backend=backend, fullgraph=True)(x, [])
    log_eager, log_captured = [], []
    torch.testing.assert_close(dynacap.optimize(with_break, backend=backend)(x, log_captured),
                               with_break(x, log_eager))
    assert log_captured == log_eager
    assert backend.compiles >= 2  # the graph before the break and the one after it


def test_dynamic_is_part_of_the_key():
    backend = CountingBackend()
    x = torch.randn(5)
    dynacap.optimize(sin_cos, backend=backend, dynamic=False)(x)
    dynacap.optimize(sin_cos, backend=backend)(x)
    dynacap.optimize(sin_cos, backend=backend, dynamic=False)(x)
    assert backend.compiles == 2 and backend.runs == 3


def test_callees_and_resume_functions_belong_to_the_calling_context():
    x = torch.randn(4)
    first, second = CountingBackend(), CountingBackend()
    log_eager, log_first, log_second = [], [], []
    expected = with_break(x, log_eager)
    torch.testing.assert_close(dynacap.optimize(with_break, backend=first)(x, log_first), expected)
    runs = first.runs
    torch.testing.assert_close(dynacap.optimize(with_break, backend=second)(x, log_second), expected)
    assert first.runs == runs, "the second backend ran graphs of the first"
    assert second.compiles == first.compiles >= 2  # before the break, and the resume function's
    assert second.runs == second.compiles
    assert log_first == log_second == log_eager


def per_constant(x, k):
    return x * k + k


def test_cache_size_limit_counts_per_context():
    a, b = CountingBackend(), CountingBackend()
    x = torch.randn(3)
    with dynacap.config.patch(cache_size_limit=2), pytest.warns(UserWarning, match="cache_size_limit"):
        for k in range(3):
            torch.testing.assert_close(dynacap.optimize(per_constant, backend=a)(x, k), per_constant(x, k))
        for k in range(2):
            torch.testing.assert_close(dynacap.optimize(per_constant, backend=b)(x, k), per_constant(x, k))
        # a past its limit runs the code eagerly; its old entries still hit
        runs = a.runs
        torch.testing.assert_close(dynacap.optimize(per_constant, backend=a)(x, 5), per_constant(x, 5))
        torch.testing.assert_close(dynacap.optimize(per_constant, backend=a)(x, 1), per_constant(x, 1))
        assert a.runs == runs + 1
    assert (a.compiles, b.compiles) == (2, 2)


def test_internal_error_in_one_context_leaves_the_code_to_others():
    def failing_backend(gm, example_inputs):
        raise RuntimeError("this backend cannot compile anything")

    good = CountingBackend()
    x = torch.randn(3)
    with pytest.warns(UserWarning, match="internal error"):
        torch.testing.assert_close(dynacap.optimize(sin_cos, backend=failing_backend)(x), sin_cos(x))
    torch.testing.assert_close(dynacap.optimize(sin_cos, backend=good)(x), sin_cos(x))
    assert good.compiles == 1 and good.runs == 1
    assert not _C.is_skip(sin_cos.__code__)


def test_explain_after_optimize_reports_its_own_capture():
    backend = CountingBackend()
    x = torch.randn(5)
    wrapper = dynacap.optimize(sin_cos, backend=backend)
    wrapper(x)
    out = dynacap.explain(sin_cos)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0
    torch.testing.assert_close(out.result, sin_cos(x))
    torch.testing.assert_close(wrapper(x), sin_cos(x))


def test_reset_drops_entries_of_every_context():
    a, b = CountingBackend(), CountingBackend()
    x = torch.randn(5)
    wa, wb = dynacap.optimize(sin_cos, backend=a), dynacap.optimize(sin_cos, backend=b)
    wa(x), wb(x)
    dynacap.reset()
    assert _C.cache_entries(sin_cos.__code__) == []
    wa(x), wb(x)
    assert (a.compiles, b.compiles) == (2, 2)


def test_reset_is_not_fooled_by_an_equal_copy_of_a_code():
    # Code objects compare equal by value; codegen keeps unhooked copies (``code.replace()``) of
    # frames it may rerun eagerly.  reset() must still drop the original's entries.
    from dynacap import hook

    code = sin_cos.__code__
    copy = code.replace()
    assert copy == code and copy is not code
    hook.skip(copy)
    x = torch.randn(5)
    dynacap.optimize(sin_cos, backend="eager")(x)
    assert len(_C.cache_entries(code)) == 1
    dynacap.reset()
    assert _C.cache_entries(code) == [] and not _C.is_skip(copy)
