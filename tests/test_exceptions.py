"""Exceptions Python raises while tracing, handled by the frame's exception table (issue 8 item 4).

``raise`` in captured code, and errors the interpreter knows Python raises at
that point (``assert`` on a known condition, ``list.pop`` of an empty list,
a string method on constants, an exception raised in an inlined callee), are
unwound into the ``try`` handler that protects them, as CPython does: the
handler's path (``except`` matching by class and tuple, ``as e``, ``else``,
``finally``, nested ``try``, bare ``raise``, ``raise ... from``) is part of
the graph.  Each program is run differentially (results, printed text,
mutated inputs, raised exception) under ``eager`` and ``aot_eager``, and
under ``fullgraph=True`` as exactly one graph.  An exception no handler
catches still runs eagerly and raises eager's exception.

PYTEST_DONT_REWRITE: the programs' own ``assert`` statements must stay Python's.
"""
import sys

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same, clone_inputs, run_differential

BACKENDS = ["eager", "aot_eager"]


class AppError(ValueError):
    code = 7


class DeeperError(AppError):
    pass


def one_graph(fn, *args, backend="eager"):
    """Eager's observables twice under dynacap; one graph, also under ``fullgraph=True``."""
    diff = run_differential(fn, *args, backend=CountingBackend(backend))
    assert diff.compiles_first == 1, f"{fn.__name__}: {diff.compiles_first} graphs"
    dynacap.reset()
    counting = CountingBackend(backend)
    expected = fn(*clone_inputs(args))
    out = dynacap.optimize(fn, backend=counting, fullgraph=True)(*clone_inputs(args))
    assert counting.compiles == 1
    assert_same(expected, out)
    return diff


# -- raise and except -----------------------------------------------------------------------------
def raise_and_catch(x):
    try:
        x = x + 1
        raise ValueError("bad", 3)
    except ValueError as e:
        return x * len(e.args), e.args


def user_subclass_caught_by_base(x):
    try:
        raise DeeperError("deep")
    except (TypeError, AppError) as e:
        return x + e.code, isinstance(e, DeeperError), type(e).__name__, e.args[0]


def first_handler_does_not_match(x):
    try:
        raise KeyError("k")
    except IndexError:
        return x - 1
    except LookupError as e:
        return x + 2, e.args


def raise_class_without_arguments(x):
    try:
        raise AppError
    except AppError as e:
        return x * 3, e.args


def else_and_finally(x):
    log = []
    try:
        y = x.sin()
    except ValueError:
        log.append("except")
        y = x
    else:
        log.append("else")
    finally:
        log.append("finally")
    try:
        raise TypeError("t")
    except TypeError:
        log.append("except2")
        y = y + 1
    else:
        log.append("else2")
    finally:
        log.append("finally2")
    return y, log


def nested_try_and_bare_reraise(x):
    try:
        try:
            raise AppError("inner")
        except AppError:
            x = x + 1
            raise
        finally:
            x = x * 2
    except ValueError as e:
        return x, e.args


def raise_from(x):
    try:
        try:
            raise KeyError("original")
        except KeyError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        return x + 1, e.__cause__.args, e.__suppress_context__, e.__context__ is e.__cause__


def raise_from_none(x):
    try:
        try:
            raise KeyError("original")
        except KeyError:
            raise RuntimeError("wrapped") from None
    except RuntimeError as e:
        return x + 1, e.__cause__ is None, e.__suppress_context__


def context_is_the_handled_exception(x):
    try:
        try:
            raise ValueError("first")
        except ValueError:
            raise TypeError("second")
    except TypeError as e:
        return x - 1, e.__context__.args, type(e.__context__).__name__


def failing_assert(x):
    try:
        assert x.dim() == 3, "wrong rank"
    except AssertionError as e:
        return x.cos(), e.args
    return x


def _validate(n):
    if n < 0:
        raise AppError("negative", n)
    return n


def _scale(x, n):
    return x * _validate(n)


def raised_two_calls_deep(x, n):
    try:
        y = _scale(x, n)
    except AppError as e:
        y = x + e.args[1]
    return y


def _cleanup_in_callee(x, log):
    try:
        raise KeyError("inside")
    finally:
        log.append("callee finally")


def callee_finally_then_caller_handler(x, log):
    try:
        _cleanup_in_callee(x, log)
    except KeyError as e:
        log.append(e.args[0])
    return x + 1


def python_errors_of_builtins(x):
    out = []
    try:
        [].pop()
    except IndexError as e:
        out.append(e.args)
    try:
        {"a": 1}.pop("b")
    except KeyError as e:
        out.append(e.args)
    try:
        "abc".index("z")
    except ValueError as e:
        out.append(e.args)
    try:
        raise 3
    except TypeError as e:
        out.append(e.args)
    return x + len(out), out


def try_in_loop(x):
    total = 0
    for i in range(4):
        try:
            if i % 2:
                raise ValueError(i)
            total += i
        except ValueError as e:
            total -= e.args[0]
            continue
        x = x + i
    return x, total


def handler_after_graph_ops_and_side_effects(x, log):
    y = x.relu()
    try:
        log.append("before")
        y = y + 1
        raise AppError("midway")
    except AppError:
        log.append("handled")
        y = y * 2
    return y


def exception_under_no_grad(x):
    try:
        with torch.no_grad():
            y = x * 2
            raise ValueError("inside no_grad")
    except ValueError:
        pass
    return y, (x * 3).requires_grad, torch.is_grad_enabled()


def return_inside_try_with_finally(x, log):
    try:
        return x + 1
    finally:
        log.append("finally")


PROGRAMS = [
    (raise_and_catch, ()), (user_subclass_caught_by_base, ()), (first_handler_does_not_match, ()),
    (raise_class_without_arguments, ()), (else_and_finally, ()), (nested_try_and_bare_reraise, ()),
    (raise_from, ()), (raise_from_none, ()), (context_is_the_handled_exception, ()), (failing_assert, ()),
    (raised_two_calls_deep, (-5,)), (callee_finally_then_caller_handler, ([],)), (python_errors_of_builtins, ()),
    (try_in_loop, ()), (handler_after_graph_ops_and_side_effects, ([],)), (return_inside_try_with_finally, ([],)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, extra", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_a_python_exception_handled_in_the_frame_is_one_graph(fn, extra, backend):
    one_graph(fn, torch.randn(2, 3), *extra, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_inside_no_grad_caught_outside_restores_the_mode(backend):
    one_graph(exception_under_no_grad, torch.randn(3, requires_grad=True), backend=backend)


# -- exceptions no handler catches: eager's exception ------------------------------------------------
def uncaught_raise(x):
    y = x + 1
    raise AppError("escapes", 2)


def handler_does_not_match(x, log):
    y = x + 1
    try:
        log.append("try")
        raise KeyError("nope")
    except ValueError:
        log.append("wrong handler")
    finally:
        log.append("finally")
    return y


def reraised_from_handler(x):
    try:
        raise ValueError("v")
    except ValueError as e:
        raise TypeError(f"converted {len(e.args)}")


def escapes_an_inlined_callee(x, n):
    y = x * 2
    return _scale(y, n) + 1


def deleted_exception_name_is_unbound(x):
    try:
        raise ValueError("v")
    except ValueError as e:
        pass
    return x + len(e.args)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, extra", [(uncaught_raise, ()), (handler_does_not_match, ([],)),
                                       (reraised_from_handler, ()), (escapes_an_inlined_callee, (-1,)),
                                       (deleted_exception_name_is_unbound, ())],
                         ids=["uncaught_raise", "handler_does_not_match", "reraised_from_handler",
                              "escapes_an_inlined_callee", "deleted_exception_name_is_unbound"])
def test_an_exception_no_handler_catches_is_eagers(fn, extra, backend):
    diff = run_differential(fn, torch.randn(3), *extra, backend=CountingBackend(backend))
    assert diff.eager.exception is not None


def test_an_uncaught_raise_keeps_the_graph_before_it():
    diff = run_differential(uncaught_raise, torch.randn(3))
    assert isinstance(diff.eager.exception, AppError)
    assert diff.compiles_first == 1


def test_fullgraph_reports_an_exception_that_escapes():
    with pytest.raises(dynacap.Unsupported, match="AppError"):
        dynacap.optimize(uncaught_raise, backend="eager", fullgraph=True)(torch.randn(3))


# -- a graph break inside a handler: the frame runs eagerly -----------------------------------------
def break_inside_handler(x, log):
    y = x + 1
    try:
        raise AppError("a")
    except AppError as e:
        print("handled", e.args)
        log.append(len(e.args))
        y = y * 2
    return y


def break_inside_finally_on_exception(x, log):
    try:
        try:
            raise KeyError("k")
        finally:
            print("cleanup")
            log.append("cleanup")
    except KeyError:
        x = x - 1
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [break_inside_handler, break_inside_finally_on_exception])
def test_a_break_inside_a_handler_is_eagers(fn, backend):
    run_differential(fn, torch.randn(3), [], backend=CountingBackend(backend))


# -- graph operations inside a try keep their guarantee ----------------------------------------------
def graph_op_raises_at_run_time_in_try(x, idx):
    try:
        raise AppError("python")
    except AppError:
        pass
    try:
        t = x[idx]
    except IndexError:
        t = x * 0
    return t


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_op_that_raises_at_run_time_still_reaches_the_handler(backend):
    run_differential(graph_op_raises_at_run_time_in_try, torch.randn(3), 1, backend=CountingBackend(backend))
    run_differential(graph_op_raises_at_run_time_in_try, torch.randn(3), 5, backend=CountingBackend(backend))


# -- guards: what the handler path read ---------------------------------------------------------------
class Coded(Exception):
    code = 1


def reads_a_class_attribute(x):
    try:
        raise Coded("c")
    except Coded as e:
        return x + e.code


def test_a_class_attribute_read_through_an_exception_is_guarded():
    compiled = dynacap.optimize(reads_a_class_attribute, backend="eager")
    x = torch.zeros(2)
    assert compiled(x).tolist() == [1.0, 1.0]
    Coded.code = 5
    try:
        assert compiled(x).tolist() == [5.0, 5.0]
    finally:
        Coded.code = 1


def _raises_for(n):
    if n > 2:
        raise AppError("big", n)
    return n


def path_depends_on_an_argument(x, n):
    try:
        return x * _raises_for(n)
    except AppError as e:
        return x - e.args[1]


def test_the_handler_path_follows_the_guarded_argument():
    compiled = dynacap.optimize(path_depends_on_an_argument, backend="eager")
    x = torch.ones(2)
    for n in (1, 5, 2, 7):
        assert torch.equal(compiled(x, n), path_depends_on_an_argument(x, n))


# -- fuzz finding F7: a store the replay would make outside the frame's handlers -----------------------
class Slotted:
    __slots__ = ("b",)


def store_on_an_object_without_that_slot(x, s):
    try:
        s.c = 1  # AttributeError: 'Slotted' object has no attribute 'c'
    except AttributeError as e:
        return x + 1, e.args
    return x


def store_without_slot_uncaught(x, s):
    y = x * 2
    s.c = y
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_attribute_error_of_a_store_reaches_the_frames_handler(backend):
    slotted = Slotted()
    one_graph(store_on_an_object_without_that_slot, torch.zeros(2), slotted, backend=backend)
    diff = run_differential(store_without_slot_uncaught, torch.zeros(2), slotted, backend=CountingBackend(backend))
    assert isinstance(diff.eager.exception, AttributeError)


# -- what a map/filter function raises while a consumer pulls: eager's, never a handler's guess -------
def _fails_on_three(v):
    if v == 3:
        raise ValueError(v)
    return v * 10


def _stops_on_three(v):
    if v == 3:
        raise StopIteration
    return v


def extend_keeps_items_before_the_failure(x, out):
    try:
        out.extend(map(_fails_on_three, [1, 2, 3, 4]))
    except ValueError:
        out.append("failed")
    return x + len(out)


def stop_iteration_ends_the_loop(x):
    total = 0
    try:
        for v in map(_stops_on_three, [1, 2, 3, 4]):
            total += v
    except StopIteration:
        total = -100
    return x + total


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, extra", [(extend_keeps_items_before_the_failure, ([],)),
                                       (stop_iteration_ends_the_loop, ())],
                         ids=["extend_keeps_items_before_the_failure", "stop_iteration_ends_the_loop"])
def test_an_exception_raised_while_pulling_a_map_is_eagers(fn, extra, backend):
    run_differential(fn, torch.zeros(2), *extra, backend=CountingBackend(backend))


# -- exception classes with their own __init__ ---------------------------------------------------------
class Totalled(Exception):
    def __init__(self, a, b=2):
        self.total = a + b


class ShapeError(ValueError):
    def __init__(self, expected, got):
        super().__init__(f"expected {expected}, got {got}")
        self.expected = expected


def init_without_super(x):
    try:
        raise Totalled(1, b=5)
    except Totalled as e:
        return x * e.total, e.args


def init_with_super(x):
    try:
        if x.shape[0] != 4:
            raise ShapeError(4, x.shape[0])
    except ShapeError as e:
        return x + e.expected, e.args
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_class_with_its_own_init(backend):
    one_graph(init_without_super, torch.randn(3), backend=backend)
    run_differential(init_with_super, torch.randn(3), backend=CountingBackend(backend))


# -- sys.exc_info(), sys.exception() and notes inside the captured handlers ------------------------------
def exc_info_inside_handler(x):
    try:
        raise KeyError("k")
    except KeyError:
        kind = sys.exc_info()[0].__name__
        handled = sys.exception()
    return x + 1, kind, handled.args


def exception_notes(x):
    try:
        e = ValueError("v")
        e.add_note("more")
        raise e
    except ValueError as err:
        return x + 1, err.__notes__


def exc_info_outside_handlers(x):
    return x + 1, sys.exc_info()[0] is None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [exc_info_inside_handler, exception_notes])
def test_the_handled_exception_and_its_notes(fn, backend):
    one_graph(fn, torch.randn(3), backend=backend)


def test_exc_info_outside_the_captured_handlers_is_the_callers():
    run_differential(exc_info_outside_handlers, torch.randn(3))
    compiled = dynacap.optimize(exc_info_outside_handlers, backend="eager")
    try:
        raise KeyError("the caller's")
    except KeyError:
        assert compiled(torch.zeros(1))[1] is False  # eager: the caller's exception is being handled


def raise_what_is_not_an_exception(x):
    out = []
    for bad in (3, "text"):
        try:
            raise bad
        except TypeError as e:
            out.append(e.args)
        try:
            raise ValueError("v") from bad
        except TypeError as e:
            out.append(e.args)
    return x + len(out), out


@pytest.mark.parametrize("backend", BACKENDS)
def test_raising_what_is_not_an_exception_is_a_type_error(backend):
    one_graph(raise_what_is_not_an_exception, torch.randn(3), backend=backend)
