"""``with`` blocks on user context managers and ``contextlib``'s (issue 8 item 4, the ``with`` part of item 2).

A user class's ``__enter__``/``__exit__`` are inlined (``__exit__(None, None,
None)`` on leaving; ``__exit__(type, e, tb)`` when an exception raised by
Python in the trace leaves the block, which it swallows by returning true);
``contextlib.contextmanager`` generators run to their ``yield`` on entering
and get the exception thrown in at the ``yield``; ``nullcontext`` and
``suppress`` are modelled.  Each program is run differentially (results,
printed text, mutated inputs, raised exception) under ``eager`` and
``aot_eager``, then under ``fullgraph=True`` as one graph.  A graph break
inside such a block keeps eager's result.
"""
import contextlib
import warnings

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same, clone_inputs, run_differential

BACKENDS = ["eager", "aot_eager"]


def one_graph(fn, *args, backend="eager", fresh_inputs=None):
    diff = run_differential(fn, *args, backend=CountingBackend(backend), fresh_inputs=fresh_inputs)
    assert diff.compiles_first == 1, f"{fn.__name__}: {diff.compiles_first} graphs"
    dynacap.reset()
    counting = CountingBackend(backend)
    e_args, _ = fresh_inputs() if fresh_inputs else (clone_inputs(args), None)
    c_args, _ = fresh_inputs() if fresh_inputs else (clone_inputs(args), None)
    expected = fn(*e_args)
    out = dynacap.optimize(fn, backend=counting, fullgraph=True)(*c_args)
    assert counting.compiles == 1
    assert_same(expected, out)
    return diff


class Recorder:
    """A context manager that records what happens to it; swallows the exception classes it is given."""

    def __init__(self, swallow=()):
        self.log = []
        self.swallow = swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", None if kind is None else kind.__name__))
        return kind is not None and issubclass(kind, self.swallow)


class Scaled:
    def __init__(self, factor):
        self.factor = factor

    def __enter__(self):
        return self.factor

    def __exit__(self, *exc):
        return False


def frame_manager(x, rec):
    with rec as r:
        x = x + 1
        r.log.append("body")
    return x, rec.log


def manager_made_in_trace(x):
    with Scaled(3) as k:
        y = x * k
    return y


def exit_swallows(x, rec):
    with rec:
        x = x * 2
        raise KeyError("swallowed")
    return x, rec.log


def exit_does_not_swallow(x, rec):
    try:
        with rec:
            x = x * 2
            raise ValueError("passes")
    except ValueError as e:
        return x - 1, e.args, rec.log


def nested_managers(x, outer, inner):
    with outer, inner:
        x = x.sin()
        raise IndexError(0)
    return x, outer.log, inner.log


@contextlib.contextmanager
def tagged(log, tag):
    log.append(("open", tag))
    try:
        yield tag * 2
    except KeyError as e:
        log.append(("caught", e.args[0]))
    finally:
        log.append(("close", tag))


@contextlib.contextmanager
def plain_generator(log):
    log.append("setup")
    yield 10
    log.append("teardown")


def generator_manager(x, log):
    with tagged(log, 2) as k:
        x = x + k
    with plain_generator(log) as n:
        x = x * n
    return x


def generator_catches(x, log):
    with tagged(log, 1):
        x = x - 1
        raise KeyError("into the generator")
    return x


def generator_finally_then_reraise(x, log):
    try:
        with tagged(log, 3):
            x = x + 3
            raise ValueError("through the generator")
    except ValueError as e:
        log.append(e.args[0])
    try:
        with plain_generator(log):
            raise TypeError("no handler in the generator")
    except TypeError:
        log.append("outer")
    return x


class Holder:
    @contextlib.contextmanager
    def scope(self, log):
        log.append("method enter")
        yield self
        log.append("method exit")


def generator_method(x, holder, log):
    with holder.scope(log) as h:
        x = x + 1
    return x, h is holder


def nullcontext_and_suppress(x):
    with contextlib.nullcontext(5) as n:
        x = x + n
    with contextlib.suppress(KeyError, IndexError):
        x = x * 2
        raise IndexError(1)
    try:
        with contextlib.suppress(KeyError):
            raise ValueError("not suppressed")
    except ValueError:
        x = x - 1
    return x


def no_grad_and_user_manager(x, rec):
    with torch.no_grad(), rec:
        y = x * 2
    return y, y.requires_grad, rec.log


X = torch.randn(3)


def exit_stack(x, rec, log):
    with contextlib.ExitStack() as stack:
        r = stack.enter_context(rec)
        k = stack.enter_context(tagged(log, 3))
        stack.callback(log.append, "callback")
        stack.enter_context(torch.no_grad())
        y = x * k
    return y, y.requires_grad, r is rec, rec.log


def exit_stack_swallows(x, rec, log):
    with contextlib.ExitStack() as stack:
        stack.callback(log.append, "first registered, last run")
        stack.enter_context(rec)
        stack.enter_context(tagged(log, 1))
        x = x + 1
        raise KeyError("the generator swallows it")
    return x, rec.log


def catch_warnings_block(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = x * 2
    return y, len(warnings.filters)


def _recorders():
    return (X.clone(), Recorder()), {}


def _swallowing():
    return (X.clone(), Recorder(swallow=(KeyError,))), {}


def _two():
    return (X.clone(), Recorder(), Recorder(swallow=(LookupError,))), {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_manager_from_the_frame(backend):
    one_graph(frame_manager, backend=backend, fresh_inputs=_recorders)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_manager_made_in_the_trace(backend):
    one_graph(manager_made_in_trace, torch.randn(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exit_swallows_the_exception_of_the_block(backend):
    one_graph(exit_swallows, backend=backend, fresh_inputs=_swallowing)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exit_sees_the_exception_and_lets_it_pass(backend):
    one_graph(exit_does_not_swallow, backend=backend, fresh_inputs=_recorders)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_managers_exit_innermost_first(backend):
    one_graph(nested_managers, backend=backend, fresh_inputs=_two)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [generator_manager, generator_catches, generator_finally_then_reraise])
def test_contextmanager_generators(fn, backend):
    one_graph(fn, torch.randn(3), [], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_contextmanager_method(backend):
    holder = Holder()
    one_graph(generator_method, backend=backend, fresh_inputs=lambda: ((X.clone(), holder, []), {}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nullcontext_and_suppress(backend):
    one_graph(nullcontext_and_suppress, torch.randn(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_mode_and_user_manager_together(backend):
    one_graph(no_grad_and_user_manager, backend=backend,
              fresh_inputs=lambda: ((X.clone().requires_grad_(), Recorder()), {}))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [exit_stack, exit_stack_swallows])
def test_exit_stack(fn, backend):
    one_graph(fn, backend=backend, fresh_inputs=lambda: ((X.clone().requires_grad_(), Recorder(), []), {}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_catch_warnings_undoes_its_filters(backend):
    before = list(warnings.filters)
    one_graph(catch_warnings_block, X.clone(), backend=backend)
    assert warnings.filters == before


# -- an exception no handler catches: eager's, after __exit__ ran ------------------------------------
def escapes_the_block(x, rec):
    with rec:
        x = x + 1
        raise ValueError("escapes", 1)
    return x


def escapes_the_generator(x, log):
    with plain_generator(log):
        x = x + 1
        raise KeyError("escapes")
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_leaving_every_block_is_eagers(backend):
    diff = run_differential(escapes_the_block, backend=CountingBackend(backend), fresh_inputs=_recorders)
    assert isinstance(diff.eager.exception, ValueError)
    diff = run_differential(escapes_the_generator, torch.randn(3), [], backend=CountingBackend(backend))
    assert isinstance(diff.eager.exception, KeyError)


# -- a graph break inside a block keeps eager's result ----------------------------------------------
def break_in_frame_manager(x, rec):
    y = x.cos()
    with rec:
        print("inside", len(rec.log))
        y = y + 1
    return y, rec.log


def break_in_made_manager(x, log):
    y = x.cos()
    with Recorder() as r:
        print("inside")
        y = y + 1
    log.extend(r.log)
    return y


def break_in_generator_block(x, log):
    y = x.cos()
    with tagged(log, 4):
        print("inside")
        y = y + 1
    return y


class Loud(Recorder):
    def __exit__(self, kind, value, tb):
        print("leaving", kind)
        return super().__exit__(kind, value, tb)


def break_in_exit(x, rec):
    y = x.cos()
    with rec:
        y = y + 1
    return y * 2, rec.log


def break_in_exit_on_exception(x, rec):
    y = x.cos()
    try:
        with rec:
            y = y + 1
            raise KeyError("k")
    except KeyError:
        y = y - 1
    return y * 2, rec.log


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_break_inside_a_frame_managers_block_resumes_there(backend):
    diff = run_differential(break_in_frame_manager, backend=CountingBackend(backend), fresh_inputs=_recorders)
    assert diff.compiles_first >= 1  # the graph before the break is kept


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_break_inside_other_blocks_is_eagers(backend):
    run_differential(break_in_made_manager, torch.randn(3), [], backend=CountingBackend(backend))
    run_differential(break_in_generator_block, torch.randn(3), [], backend=CountingBackend(backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [break_in_exit, break_in_exit_on_exception])
def test_a_break_inside_exit_is_eagers(fn, backend):
    run_differential(fn, backend=CountingBackend(backend), fresh_inputs=lambda: ((X.clone(), Loud()), {}))


@contextlib.contextmanager
def stops_early(log):
    log.append("start")
    next(iter([]))  # StopIteration inside the generator: RuntimeError as it leaves it (PEP 479)
    yield 1


def stop_iteration_inside_the_generator(x, log):
    try:
        with stops_early(log):
            x = x + 1
    except RuntimeError as e:
        return x - 1, str(e)
    except StopIteration:
        return x * 0, "wrong"
    return x, "none"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stop_iteration_leaving_a_contextmanager_generator_is_eagers(backend):
    run_differential(stop_iteration_inside_the_generator, X.clone(), [], backend=CountingBackend(backend))


class _PassThroughMode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def torch_mode_block(x, mode):
    with mode:
        y = x + 1
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_managers_enter_from_torch_runs_eagerly(backend):
    mode = _PassThroughMode()
    run_differential(torch_mode_block, X.clone(), mode, backend=CountingBackend(backend))
    out = dynacap.explain(torch_mode_block)(X.clone(), mode)
    assert any("torch.overrides" in r.reason for r in out.break_reasons)


def exit_stack_pop_all(x):
    log = []
    with contextlib.ExitStack() as stack:
        stack.callback(log.append, "moved")
        later = stack.pop_all()
    log.append("after with")
    later.close()
    return x + 1, log


@pytest.mark.parametrize("backend", BACKENDS)
def test_exit_stack_pop_all_moves_the_callbacks(backend):
    one_graph(exit_stack_pop_all, X.clone(), backend=backend)
