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


# -- item 12: an interrupt during capture leaves no mode behind and no broken frame ----------

_INTERRUPT_SCENARIO = """
    import io, json, torch, dynacap
    from torch._subclasses.fake_tensor import FakeTensorMode
    from dynacap import _C
    from dynacap.graph.builder import GraphBuilder
    from dynacap.interpreter import Tracer

    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 8)
    buf = io.StringIO()

    def helper(y):
        with torch.no_grad():
            z = torch.relu(y) * 2
        return z + 1

    def program(x):
        y = layer(x).sin()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            w = torch.mm(y, y.t())
        print("between", file=buf)      # a graph break: a resume function is captured too
        return helper(y).cos() + w.float().sum()

    def state():
        from torch.utils import _python_dispatch as pd
        return {{
            "fake": torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None,
            "dispatch_stack": torch._C._len_torch_dispatch_stack(),
            "function_stack": torch._C._len_torch_function_stack(),
            "grad": torch.is_grad_enabled(),
            "autocast": torch.is_autocast_enabled("cpu"),
            "in_dispatch_mode": pd._is_in_torch_dispatch_mode,
            "eager_is_real": type(torch.ones(2) + 1) is torch.Tensor,
        }}

    # (owner, attribute, raise before the call or after it)
    POINTS = [
        (Tracer, "step", "before"),                   # every instruction interpreted
        (GraphBuilder, "call", "before"),             # every graph operation
        (FakeTensorMode, "__enter__", "after"),       # fake mode just entered
        (FakeTensorMode, "__exit__", "before"),       # fake mode about to be left
        (torch.autocast, "__enter__", "after"),       # autocast just switched on while tracing
        (torch.autocast, "__exit__", "before"),
    ]
    calls = {{"n": 0, "fire": None}}

    def injected(original, when):
        def wrapper(*args, **kwargs):
            calls["n"] += 1
            if when == "before" and calls["n"] == calls["fire"]:
                raise KeyboardInterrupt
            result = original(*args, **kwargs)
            if when == "after" and calls["n"] == calls["fire"]:
                raise KeyboardInterrupt
            return result
        return wrapper

    x = torch.randn(4, 8)
    expected = program(x)
    clean = state()
    wrapped = dynacap.optimize(program, backend="{backend}")
    wrapped(x)  # warm-up
    failures, runs, interrupts = [], 0, 0
    for owner, name, when in POINTS:
        original = owner.__dict__[name]
        setattr(owner, name, injected(original, when))
        try:
            dynacap.reset()
            calls["n"], calls["fire"] = 0, None
            wrapped(x)                        # count the calls of one whole capture
            total = calls["n"]
            points = sorted({{max(1, round(total * k / {samples})) for k in range(1, {samples} + 1)}})
            for n in points:
                dynacap.reset()
                calls["n"], calls["fire"] = 0, n
                interrupted = False
                try:
                    wrapped(x)
                except KeyboardInterrupt:
                    interrupted = True
                runs += 1
                interrupts += interrupted
                calls["fire"] = None
                label = f"{{owner.__name__}}.{{name}} call {{n}}/{{total}}"
                if state() != clean:
                    failures.append(f"{{label}}: state left {{state()}}")
                    break
                if _C.is_skip(program.__code__):
                    failures.append(f"{{label}}: the frame was marked skip")
                before = _C.cache_stats()["callback_calls"]
                again = wrapped(x)
                if not torch.allclose(again, expected, atol=1e-2, rtol=1e-2):
                    failures.append(f"{{label}}: the next call gave a wrong result")
                if interrupted and _C.cache_stats()["callback_calls"] == before:
                    failures.append(f"{{label}}: the next call captured nothing")
                if len(_C.cache_entries(program.__code__)) != 1:
                    failures.append(f"{{label}}: {{len(_C.cache_entries(program.__code__))}} entries")
                if state() != clean:
                    failures.append(f"{{label}}: state after the next call {{state()}}")
        finally:
            setattr(owner, name, original)
    print(json.dumps({{"runs": runs, "interrupts": interrupts, "failures": failures[:20]}}))
"""


@pytest.mark.parametrize("backend,samples", [("eager", 8), ("aot_eager", 3)])
def test_keyboard_interrupt_at_any_point_of_a_capture(backend, samples):
    report = run_script(_INTERRUPT_SCENARIO.format(backend=backend, samples=samples), timeout=400)
    assert report["failures"] == []
    assert report["interrupts"] >= report["runs"] * 3 // 4, report


def index_in_no_grad(x, idx):
    with torch.no_grad():
        y = x[idx] * 2
    return y + 1


def index_in_autocast(x, idx):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x, x.t())[idx]
    return y.float() + 1


@pytest.mark.parametrize("fn", [index_in_no_grad, index_in_autocast])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_graph_that_raises_inside_a_mode_block_leaves_the_block(fn, backend):
    x, bad = torch.randn(3, 3), torch.tensor([5])  # out of range: raises when the graph runs
    wrapped = dynacap.optimize(fn, backend=backend)
    torch.testing.assert_close(wrapped(x, torch.tensor([1])), fn(x, torch.tensor([1])))
    with pytest.raises(IndexError) as eager_error:
        fn(x, bad)
    with pytest.raises(IndexError) as captured_error:
        wrapped(x, bad)
    assert str(captured_error.value) == str(eager_error.value)
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
    torch.testing.assert_close(wrapped(x, torch.tensor([2])), fn(x, torch.tensor([2])))


_SIGINT_LOOP = """
    import io, json, os, random, signal, threading, time, torch, dynacap

    layer = torch.nn.Linear(8, 8)
    buf = io.StringIO()

    def helper(y):
        with torch.no_grad():
            z = torch.relu(y) * 2
        return z + 1

    def program(x):
        y = layer(x).sin()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            w = torch.mm(y, y.t())
        print("between", file=buf)
        return helper(y).cos() + w.float().sum()

    def state():
        return (torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack(),
                torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"), type(torch.ones(1) + 1) is torch.Tensor)

    x = torch.randn(4, 8)
    expected, clean = program(x), state()
    dynacap.optimize(program, backend="eager")(x)
    dynacap.reset()
    start = time.perf_counter()
    dynacap.optimize(program, backend="eager")(x)
    span = time.perf_counter() - start
    rng = random.Random(0)
    bad = interrupted = 0
    for _ in range({iterations}):
        dynacap.reset()
        timer = threading.Timer(rng.uniform(0, span), os.kill, (os.getpid(), signal.SIGINT))
        try:
            timer.start()
            try:
                dynacap.optimize(program, backend="eager")(x)
                timer.join()
                time.sleep(0.002)
            finally:
                timer.cancel()
        except KeyboardInterrupt:
            interrupted += 1
        if state() != clean or not torch.allclose(dynacap.optimize(program, backend="eager")(x), expected,
                                                  atol=1e-2, rtol=1e-2):
            bad += 1
            break
    print(json.dumps({{"interrupted": interrupted, "bad": bad}}))
"""


@pytest.mark.slow
def test_real_sigint_at_random_moments():
    report = run_script(_SIGINT_LOOP.format(iterations=200), timeout=600)
    assert report["bad"] == 0 and report["interrupted"] > 100, report
