"""Graph breaks that resume capture: results equal eager, and graphs are kept around the break."""
import sys

import pytest
import torch

import dynacap
from break_programs import PROGRAMS
import break_programs as bp
from differential import CountingBackend, explain_captured, run_differential


@pytest.mark.parametrize("name,fn,make_inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_break_program_matches_eager(name, fn, make_inputs):
    args, kwargs = make_inputs()
    saved_scale = bp.SCALE
    try:
        run_differential(fn, *args, fresh_inputs=make_inputs, **kwargs)
    finally:
        bp.SCALE = saved_scale


def test_print_mid_is_two_graphs_one_break(capsys):
    x = bp.t(4)
    out = explain_captured(bp.print_mid, x)
    assert (out.graph_count, out.graph_break_count) == (2, 1), str(out)
    assert "print" in out.break_reasons[0].reason
    printed = capsys.readouterr().out
    assert printed.count("p\n") == 2  # once for the eager reference, once under capture


def test_tensor_branch_both_ways_repeatedly():
    f = dynacap.optimize(bp.tensor_if, backend="eager")
    for _ in range(3):
        for x in (bp.t(4).abs(), -bp.t(4).abs()):
            assert torch.equal(f(x), bp.tensor_if(x))
    out = dynacap.explain(bp.tensor_if)(bp.t(4).abs())
    assert out.graph_break_count == 1
    assert "torch.where" in out.break_reasons[0].reason


@pytest.mark.parametrize("fn,expected", [(bp.depth1, 2), (bp.f_calls_g, 2), (bp.depth3, 2)],
                         ids=["depth1", "depth2", "depth3"])
def test_nested_breaks_resume_inside_callees(fn, expected):
    out = explain_captured(fn, bp.t(4))
    assert out.graph_count == expected, str(out)
    assert out.graph_break_count == 1
    stack = out.break_reasons[0].user_stack
    assert [fs.name for fs in stack][-1] == "h_prints"
    assert all(fs.filename == bp.__file__ for fs in stack)


@pytest.mark.parametrize("outer_grad", [True, False])
def test_no_grad_break_grad_mode(outer_grad):
    x = bp.t(4, grad=True)
    f = dynacap.optimize(bp.no_grad_break, backend="eager")
    with torch.set_grad_enabled(outer_grad):
        expected = bp.no_grad_break(x)
        got = f(x)
        assert torch.is_grad_enabled() is outer_grad
    assert got[2] == expected[2]
    assert got[0].requires_grad == expected[0].requires_grad
    assert got[1].requires_grad == expected[1].requires_grad
    torch.testing.assert_close(got[0], expected[0])


def test_exception_in_with_block_restores_grad_mode():
    def f(x):
        with torch.no_grad():
            y = x * 2
            bp.json.loads("{")
            return y

    g = dynacap.optimize(f, backend="eager")
    with pytest.raises(ValueError):
        g(bp.t(3, grad=True))
    assert torch.is_grad_enabled()


def test_break_reasons_name_file_and_line():
    out = dynacap.explain(bp.several_breaks)(bp.t(4))
    assert out.graph_break_count == 3
    assert out.graph_count == 4
    for reason in out.break_reasons:
        top = reason.user_stack[-1]
        assert top.filename == bp.__file__
        assert "print" in (top.line or "")
        assert f"{bp.__file__}:{top.lineno}" in str(out)


def test_fullgraph_raises_at_first_break():
    f = dynacap.optimize(bp.print_mid, backend="eager", fullgraph=True)
    with pytest.raises(dynacap.Unsupported) as info:
        f(bp.t(4))
    assert f"{bp.__file__}:" in str(info.value)
    assert "print" in str(info.value)


def test_dead_locals_are_not_passed_to_resume():
    out = dynacap.explain(bp.many_locals)(bp.t(4))
    assert out.graph_count == 2
    resume_inputs = [n.target for n in out.graphs[1].graph.nodes if n.op == "placeholder"]
    assert not any("dead" in name for name in resume_inputs), resume_inputs
    assert not any(name.endswith("_a") or name.endswith("_b") for name in resume_inputs), resume_inputs


def test_eager_exception_traceback_points_at_user_line():
    f = dynacap.optimize(bp.eager_part_raises, backend="eager")
    with pytest.raises(ValueError) as info:
        f(bp.t(4))
    frames = [(fs.filename, fs.name) for fs in __import__("traceback").extract_tb(info.tb)]
    assert (bp.__file__, "eager_part_raises") in frames


def test_recursion_limit_not_hit_by_long_loop_with_break(capsys):
    def loop(x, n):
        for i in range(n):
            x = x + 1
            print(i)
        return x

    f = dynacap.optimize(loop, backend="eager")
    torch.testing.assert_close(f(torch.zeros(2), 300), torch.full((2,), 300.0))
    assert sys.getrecursionlimit() > 0


def nested_loops_print(x):
    for i in range(2):
        for j in range(2):
            x = x * 1.5 + j
            print("cell", i, j)
        x = x - i
    return x


def nested_loops_print_longer(x):
    for i in range(2):
        for j in range(3):
            x = x * 1.5 + j
            print("cell", i, j)
        x = x - i
    return x


class LayersWithLogging(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x).relu()
            print("layer", i, tuple(x.shape))
        return x


LAYERS = LayersWithLogging()


@pytest.mark.parametrize("fn,make_args,graphs", [
    (bp.for_range_print, lambda: (bp.t(4),), 3),
    (bp.for_list_print, lambda: (bp.t(4), (1.0, 2.0, 0.5)), 3),
    # A list may change after the break: the loop is not resumed inside, its rest runs eagerly
    # over the live list (tests/test_live_iterators.py).
    (bp.for_list_print, lambda: (bp.t(4), [1.0, 2.0, 0.5]), 1),
    # Each outer iteration left runs the inner loop again: 1 + 1 * 2 = 3 iterations ahead at the first break.
    (nested_loops_print, lambda: (bp.t(4),), 5),
    # 2 + 1 * 3 = 5 iterations ahead, more than MAX_RESUMED_ITERATIONS: the rest of the frame runs eagerly
    # (counting the loops' iterations left as a sum, 3, resumed it 6 levels deep).
    (nested_loops_print_longer, lambda: (bp.t(4),), 1),
    (lambda x: LAYERS(x), lambda: (bp.t(2, 4),), 3),
], ids=["range", "tuple", "list", "nested", "nested_longer", "module_list"])
def test_break_inside_unrolled_for_loop_resumes_each_iteration(fn, make_args, graphs):
    run_differential(fn, *make_args(), fresh_inputs=lambda: (make_args(), {}))
    out = explain_captured(fn, *make_args())
    assert out.graph_count == graphs, str(out)


def test_while_loop_and_long_for_loop_keep_the_graph_before_and_run_the_rest_eagerly():
    out = explain_captured(bp.while_print, bp.t(4))
    assert (out.graph_count, out.graph_break_count) == (1, 1), str(out)
    sin_targets = [n.target for n in out.graphs[0].graph.nodes if n.op == "call_method"]
    assert sin_targets == ["sin"]

    def long_loop(x, n):
        y = x.cos()
        for i in range(n):
            y = y + 1
            print(i)
        return y

    run_differential(long_loop, bp.t(2), 40)
    out = explain_captured(long_loop, bp.t(2), 40)
    assert (out.graph_count, out.graph_break_count) == (1, 1), str(out)


@pytest.mark.parametrize("fn", [bp.try_except_before, bp.try_raise_after_break], ids=["except", "finally"])
def test_break_inside_try_keeps_the_graph_before_it(fn):
    run_differential(fn, bp.t(4))
    out = explain_captured(fn, bp.t(4))
    assert (out.graph_count, out.graph_break_count) == (1, 1), str(out)


def test_break_inside_unknown_with_block_runs_its_exit():
    class Recorder:
        def __init__(self):
            self.events = []

        def __enter__(self):
            self.events.append("enter")

        def __exit__(self, *exc):
            self.events.append(f"exit {exc[0].__name__ if exc[0] else None}")
            return False

    def f(x, rec, fail):
        y = x * 2
        with rec:
            z = y + 1
            if fail:
                bp.json.loads("{")
            print("inside")
        return z

    for fail in (False, True):
        r_eager, r_cap = Recorder(), Recorder()
        expected = error = None
        try:
            expected = f(bp.t(3), r_eager, fail)
        except ValueError as e:
            error = type(e)
        g = dynacap.optimize(f, backend="eager")
        if error is None:
            torch.testing.assert_close(g(bp.t(3), r_cap, fail), expected)
        else:
            with pytest.raises(error):
                g(bp.t(3), r_cap, fail)
        assert r_cap.events == r_eager.events
        dynacap.reset()


def _long_python_loop(x):
    total = 0
    for i in range(6000):
        total += i % 7
    return x + total


def _step(i):
    a = i * 3
    b = a % 5
    return a + b - i


def _many_inlined_calls(x, n):
    total = 0
    for i in range(n):
        total += _step(i)
    return x * total


def test_a_loop_past_max_unroll_iterations_breaks_and_gives_the_eager_result():
    out = explain_captured(_long_python_loop, torch.ones(3))
    reasons = [r.reason for r in out.break_reasons]
    assert any("config.max_unroll=4096 iterations" in r and "_long_python_loop" in r for r in reasons), reasons
    run_differential(_long_python_loop, torch.ones(3))


def test_the_instruction_budget_bounds_a_capture_not_the_loop_count():
    # Past the old fixed bound (65,536 instructions in a capture) and under max_unroll iterations: one graph.
    out = explain_captured(_many_inlined_calls, torch.ones(3), 3000)
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)
    with dynacap.config.patch(max_instructions=3000):
        dynacap.reset()
        out = explain_captured(_many_inlined_calls, torch.ones(3), 3000)
    reasons = [r.reason for r in out.break_reasons]
    assert any("config.max_instructions=3000" in r for r in reasons), reasons
    with dynacap.config.patch(max_instructions=3000):
        run_differential(_many_inlined_calls, torch.ones(3), 3000)


class _Named:
    def __str__(self):
        return "named"


def _prints_constants(x, n):
    y = x + 1
    print("shape", tuple(y.shape), n, _Named(), sep="|")
    z = y * 2
    print("done", end="!\n", flush=True)
    return z


def _prints_then_mutates(x):
    y = x * 2
    print("before the in-place op")
    x.add_(1)
    return y + x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_reorderable_print_is_replayed_after_the_graph_with_eager_text(backend):
    with dynacap.config.patch(reorderable_logging_functions={print}):
        counting = CountingBackend(inner=backend)
        run_differential(_prints_constants, torch.ones(2), 3, backend=counting)  # the printed text included
        assert counting.compiles == 1
        out = explain_captured(_prints_constants, torch.ones(2), 3)
        assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)
        # A side effect before an in-place change of an input: the graph is split there (program order).
        run_differential(_prints_then_mutates, torch.ones(2))


def _prints_a_tensor(x):
    print("x is", x)
    return x + 1


class _Sink:
    """A stream written in Python: what print writes could be read by the trace before the replay."""

    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)


def _prints_to_a_python_stream(x, sink):
    print("to the sink", file=sink)
    return x + len(sink.parts)


def _prints_to_a_stringio(x, buf):
    print("first", 1, file=buf)
    y = x * 2
    print("second", tuple(y.shape), file=buf, sep=",")
    return y


def test_reorderable_print_to_a_stringio_from_the_frame_writes_eager_text():
    import io

    with dynacap.config.patch(reorderable_logging_functions={print}):
        buf, expected_buf = io.StringIO(), io.StringIO()
        expected = _prints_to_a_stringio(torch.ones(2), expected_buf)
        out = dynacap.explain(_prints_to_a_stringio)(torch.ones(2), buf)
    assert torch.equal(out.result, expected) and buf.getvalue() == expected_buf.getvalue()
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)


@pytest.mark.parametrize("fn,reason", [(_prints_a_tensor, "of a tensor"),
                                       (_prints_to_a_python_stream, "file=")])
def test_reorderable_print_still_breaks_where_its_text_or_stream_is_not_known(fn, reason):
    args = (torch.ones(2), _Sink()) if fn is _prints_to_a_python_stream else (torch.ones(2),)
    with dynacap.config.patch(reorderable_logging_functions={print}):
        run_differential(fn, *args, fresh_inputs=lambda: (((torch.ones(2), _Sink()) if len(args) == 2 else args), {}),
                         check_identity=False)
        out = dynacap.explain(fn)(*args)
    assert out.graph_break_count == 1 and reason in out.break_reasons[0].reason, str(out)
