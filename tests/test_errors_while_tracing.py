"""Errors Python raises while tracing are caught by the frame's handlers in one graph, as eager catches them.

``except*`` over exception groups, ``sys.exc_info()`` outside the handlers (guarded: the caller handles
nothing), generators driven by ``send``/``close`` (a ``yield`` inside ``try``/``with``), ``zip`` pulling
its iterators in turn (``strict=True``), ``reversed`` over a live list, ``iter(fn, sentinel)``, and the
errors of operators, attribute reads and unpacking on values the trace knows.  Each test is differential
(result, printed text, mutated inputs, the exception that escapes), then counts graphs.
"""
from __future__ import annotations

import contextlib
import sys
import types

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_fully_captured, run_differential

BACKENDS = ["eager", "aot_eager"]


def captured_in_one_graph(fn, *args, backend="eager"):
    run_differential(fn, *args, backend=CountingBackend(backend))
    assert_fully_captured(fn, *args)


# -- except* ------------------------------------------------------------------------------------------------
def group_split_between_clauses(x):
    caught = []
    try:
        raise ExceptionGroup("g", [ValueError("a"), KeyError("b")])
    except* ValueError as eg:
        caught.append((len(eg.exceptions), str(eg), eg.__suppress_context__, eg.__cause__))
    except* KeyError:
        caught.append("key")
    return x + 1, caught


def group_rest_escapes_to_outer_handler(x):
    try:
        try:
            raise ExceptionGroup("g", [ValueError("a"), KeyError("b"), TypeError("t")])
        except* ValueError:
            pass
    except ExceptionGroup as e:
        return x + 1, str(e), [type(s).__name__ for s in e.exceptions], e.message
    return x


def naked_exception_caught_by_except_star(x):
    try:
        raise ValueError("v")
    except* ValueError as eg:
        seen = (type(eg).__name__, str(eg), type(eg.exceptions[0]).__name__)
    return x + 1, seen


def except_star_handler_raises(x):
    try:
        try:
            raise ExceptionGroup("g", [ValueError("a"), KeyError("b")])
        except* ValueError:
            raise RuntimeError("r")
    except ExceptionGroup as e:
        return x + 1, str(e), sorted(type(s).__name__ for s in e.exceptions)
    return x


def except_star_bare_reraise_merges_back(x):
    try:
        try:
            raise ExceptionGroup("g", [ValueError("a"), KeyError("b")])
        except* ValueError:
            raise
    except ExceptionGroup as e:
        return x + 1, str(e), [type(s).__name__ for s in e.exceptions]
    return x


def nested_groups_keep_their_nesting(x):
    log = []
    try:
        try:
            raise ExceptionGroup("outer", [ValueError("a"), ExceptionGroup("inner", [KeyError("k"), ValueError("b")])])
        except* ValueError as eg:
            log.append((str(eg), [type(e).__name__ for e in eg.exceptions]))
    except* KeyError as eg:
        log.append((str(eg), str(eg.exceptions[0]), type(eg.exceptions[0].exceptions[0]).__name__))
    return x + 1, log


def nesting_base_exceptions_is_a_type_error(x):
    try:
        ExceptionGroup("g", [KeyboardInterrupt()])
    except TypeError as e:
        return x + 1, str(e)
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [group_split_between_clauses, group_rest_escapes_to_outer_handler,
                                naked_exception_caught_by_except_star, except_star_handler_raises,
                                except_star_bare_reraise_merges_back, nested_groups_keep_their_nesting,
                                nesting_base_exceptions_is_a_type_error], ids=lambda f: f.__name__)
def test_except_star_in_one_graph(fn, backend):
    captured_in_one_graph(fn, torch.randn(3), backend=backend)


def test_unmatched_group_escapes_as_eager():
    def f(x):
        try:
            raise ExceptionGroup("left", [ValueError("a")])
        except* KeyError:
            pass
        return x

    run_differential(f, torch.zeros(2))  # the ExceptionGroup leaves the call: its type and message are eager's


class Special(ExceptionGroup):
    pass


def test_a_group_subclass_still_breaks():
    def f(x):
        try:
            raise Special("s", [ValueError("a")])
        except* ValueError:
            n = 1
        return x + n

    run_differential(f, torch.zeros(2))
    assert dynacap.explain(f)(torch.zeros(2)).graph_break_count >= 1


# -- sys.exc_info() outside the handlers ----------------------------------------------------------------------
def exc_info_outside_handlers(x):
    return x + 1, sys.exc_info()[0] is None, sys.exception() is None


def test_exc_info_outside_handlers_is_guarded():
    """One graph while the caller handles nothing; called from a caller's handler, eager's answer."""
    captured_in_one_graph(exc_info_outside_handlers, torch.zeros(2))
    backend = CountingBackend()
    compiled = dynacap.optimize(exc_info_outside_handlers, backend=backend)
    assert compiled(torch.zeros(2))[1:] == (True, True)
    try:
        raise KeyError("caller's")
    except KeyError:
        assert compiled(torch.zeros(2))[1:] == (False, False)
    assert compiled(torch.zeros(2))[1:] == (True, True)


def test_bare_raise_outside_handlers_raises_the_callers():
    def f(x):
        y = x + 1
        raise

    compiled = dynacap.optimize(f, backend=CountingBackend())
    with pytest.raises(RuntimeError, match="No active exception to reraise"):
        compiled(torch.zeros(2))
    with pytest.raises(KeyError, match="caller"):
        try:
            raise KeyError("caller")
        except KeyError:
            compiled(torch.zeros(2))


# -- generators: send, close, yield inside try/with --------------------------------------------------------
def generator_send_accumulates(x):
    def acc():
        total = 0
        while True:
            v = yield total
            total = total + v

    g = acc()
    next(g)
    g.send(1)
    return x * g.send(2)


def send_to_a_just_started_generator(x):
    def gen():
        yield 1

    g = gen()
    try:
        g.send(5)
    except TypeError as e:
        return x + 1, str(e)
    return x


def send_past_the_end_gives_the_return_value(x):
    def gen():
        v = yield 1
        return v * 10

    g = gen()
    next(g)
    try:
        g.send(4)
    except StopIteration as e:
        return x + e.value, e.args
    return x


def close_runs_the_finally(x):
    log = []

    def gen():
        try:
            yield 1
            yield 2
        finally:
            log.append("closed")

    g = gen()
    next(g)
    g.close()
    g.close()
    return x + 1, log, list(g)


def close_of_a_generator_that_yields_again(x):
    def gen():
        try:
            yield 1
        except GeneratorExit:
            pass
        yield 2

    g = gen()
    next(g)
    try:
        g.close()
    except RuntimeError as e:
        return x + 1, str(e)
    return x


def close_before_start_runs_nothing(x):
    log = []

    def gen():
        try:
            yield 1
        finally:
            log.append("f")

    g = gen()
    g.close()
    return x + 1, log, list(g)


def generator_finished_inside_try(x):
    log = []

    def gen():
        try:
            yield x
            yield x * 2
        finally:
            log.append("done")

    return sum(gen()), log


@contextlib.contextmanager
def noting(log):
    log.append("enter")
    yield
    log.append("exit")


def yield_inside_a_with_block(x):
    log = []

    def gen():
        with noting(log):
            yield 1
            yield 2

    return x + sum(gen()), log


def list_of_a_generator_that_raises(x):
    def gen():
        yield 1
        raise KeyError("k")

    try:
        list(gen())
    except KeyError as e:
        return x + 1, str(e)
    return x


def throw_past_the_last_yield(x):
    def gen():
        yield 1

    g = gen()
    next(g)
    try:
        g.throw(KeyError)
    except KeyError as e:
        return x + 1, e.args, list(g)
    return x


def throw_caught_by_the_generator_which_returns(x):
    def gen():
        try:
            yield 1
        except ValueError as e:
            return str(e)

    g = gen()
    next(g)
    try:
        g.throw(ValueError("w"))
    except StopIteration as e:
        return x + 1, e.value
    return x


def throw_into_a_generator_not_started(x):
    def gen():
        yield 1

    g = gen()
    try:
        g.throw(ValueError("not started"))
    except ValueError as e:
        return x + 1, str(e), list(g)
    return x


def throw_runs_the_finally(x):
    log = []

    def gen():
        try:
            yield 1
        finally:
            log.append("f")

    g = gen()
    next(g)
    try:
        g.throw(ValueError("x"))
    except ValueError:
        pass
    return x + 1, log


@pytest.mark.parametrize("fn", [throw_past_the_last_yield, throw_caught_by_the_generator_which_returns,
                                throw_into_a_generator_not_started, throw_runs_the_finally],
                         ids=lambda f: f.__name__)
def test_generator_throw_in_one_graph(fn):
    captured_in_one_graph(fn, torch.randn(3))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [generator_send_accumulates, send_to_a_just_started_generator,
                                send_past_the_end_gives_the_return_value, close_runs_the_finally,
                                close_before_start_runs_nothing, generator_finished_inside_try,
                                yield_inside_a_with_block], ids=lambda f: f.__name__)
def test_generators_in_one_graph(fn, backend):
    captured_in_one_graph(fn, torch.randn(3), backend=backend)


def test_list_of_a_raising_generator_is_caught():
    captured_in_one_graph(list_of_a_generator_that_raises, torch.randn(3))


def test_close_of_a_generator_that_yields_again():
    # The generator is left suspended inside its except block: the frame runs eagerly, with eager's result.
    run_differential(close_of_a_generator_that_yields_again, torch.randn(3))


def test_a_generator_a_local_holds_is_closed_when_the_frame_returns():
    """Eager runs the finally when the frame's teardown frees the generator (the caller's list has it)."""
    def f(x, log):
        def gen():
            try:
                yield 1
                yield 2
            finally:
                log.append("closed")

        g = gen()
        v = next(g)
        return x + v

    run_differential(f, torch.zeros(2), [])
    assert_fully_captured(f, torch.zeros(2), [])
    log = []
    dynacap.optimize(f, backend=CountingBackend())(torch.zeros(2), log)
    assert log == ["closed"]


def closed_in_the_order_of_the_locals(x):
    log = []

    def gen(tag):
        try:
            yield 1
        finally:
            log.append(tag)

    b = gen("b")
    a = gen("a")
    next(a)
    next(b)
    return x + 1, log


def test_generators_closed_in_the_order_of_the_locals():
    captured_in_one_graph(closed_in_the_order_of_the_locals, torch.zeros(2))


def test_a_generator_freed_before_the_return_runs_the_frame_eagerly():
    """`g = None` frees it there (its finally runs before "after"): a moment the trace does not model."""
    def f(x, log):
        def gen():
            try:
                yield 1
            finally:
                log.append("closed")

        g = gen()
        next(g)
        g = None
        log.append("after")
        return x + 1

    out = run_differential(f, torch.zeros(2), [])
    assert out.backend.compiles == 0


def test_a_break_while_a_generator_is_suspended_in_try_runs_the_frame_eagerly():
    def f(x, log):
        def gen():
            try:
                yield 1
            finally:
                log.append("closed")

        g = gen()
        v = next(g)
        print("between")  # a graph break
        return x + v

    out = run_differential(f, torch.zeros(2), [])
    assert out.backend.compiles == 0


# -- zip, reversed, iter(fn, sentinel) -------------------------------------------------------------------------
def zip_leaves_the_rest_of_an_iterator(x):
    it = iter([1, 2, 3])
    pairs = list(zip(it, [10]))
    return x * next(it), pairs


def zip_reads_a_list_growing_in_the_loop(x, xs):
    n = 0
    for a, b in zip(xs, range(5)):
        if a < 3:
            xs.append(a + 10)
        n += b
    return x + n


def zip_strict_too_short(x):
    try:
        list(zip([1, 2], [1], strict=True))
    except ValueError as e:
        return x + 1, str(e)
    return x


def zip_strict_too_long(x):
    try:
        list(zip([1], [1], [1, 2], strict=True))
    except ValueError as e:
        return x + 1, str(e)
    return x


def reversed_reads_the_live_list(x):
    xs = [1, 2, 3]
    r = reversed(xs)
    xs[0] = 100
    first = next(r)
    xs.pop()
    return x * first, list(r)


def iter_until_sentinel(x):
    counter = iter([1, 2, 3, 0, 5])
    values = list(iter(lambda: next(counter), 0))
    return x * sum(values), values, next(counter)


def iter_until_the_callable_stops(x):
    counter = iter([1, 2])
    return x * sum(iter(lambda: next(counter), 0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [zip_leaves_the_rest_of_an_iterator, zip_strict_too_short, zip_strict_too_long,
                                reversed_reads_the_live_list, iter_until_sentinel, iter_until_the_callable_stops],
                         ids=lambda f: f.__name__)
def test_iteration_in_one_graph(fn, backend):
    captured_in_one_graph(fn, torch.randn(3), backend=backend)


def test_zip_over_a_list_the_loop_extends():
    """The list is read at each step (eager's zip holds the list's iterator); the frame list is mutated."""
    captured_in_one_graph(zip_reads_a_list_growing_in_the_loop, torch.zeros(2), [1, 2, 5])


def test_zip_strict_mismatch_escapes_as_eager():
    def f(x):
        return x * len(list(zip([1, 2], [1], strict=True)))

    run_differential(f, torch.zeros(2))


# -- operators, attributes, unpacking ------------------------------------------------------------------------
def division_by_zero_in_a_loop(x):
    total = x
    for v in [1, 0, 2]:
        try:
            total = total + 1 / v
        except ZeroDivisionError:
            continue
    return total


def modulo_by_zero_message(x):
    try:
        7 % 0
    except ZeroDivisionError as e:
        return x + 1, str(e)
    return x


def zero_division_in_a_comprehension(x):
    try:
        [1 // v for v in [1, 0]]
    except ZeroDivisionError as e:
        return x + 1, str(e)
    return x


@pytest.mark.parametrize("fn", [division_by_zero_in_a_loop, modulo_by_zero_message, zero_division_in_a_comprehension],
                         ids=lambda f: f.__name__)
def test_operator_errors_in_one_graph(fn):
    captured_in_one_graph(fn, torch.randn(3))


def test_division_by_zero_in_the_handler_prints_and_mutates():
    def f(x, seen):
        try:
            v = 1 / 0
        except ZeroDivisionError as e:
            seen.append(str(e))
            print("handled", e)
            v = 2
        return x * v

    run_differential(f, torch.zeros(2), [])  # the printed text and the list are eager's


class Lazy:
    def __init__(self, t):
        self.t = t

    def __getattr__(self, name):
        if name.startswith("times_"):
            return self.t * int(name[len("times_"):])
        raise AttributeError(name)


class FailingProperty:
    def __init__(self, t):
        self.t = t

    @property
    def value(self):
        raise AttributeError("not yet")

    def __getattr__(self, name):
        return f"fallback:{name}"


class Plain:
    def __init__(self, t):
        self.t = t


def hasattr_through_getattr_hook(x):
    lz = Lazy(x)
    return x + (1 if hasattr(lz, "nope") else 0), lz.times_2


def property_error_falls_back_to_getattr(x):
    f = FailingProperty(x)
    return x + 1, f.value, f.missing


def missing_attribute_of_an_object_caught(x):
    p = Plain(x)
    try:
        v = p.nope
    except AttributeError as e:
        return x + 1, str(e)
    return v


def user_getattr_error_caught_with_its_args(x):
    try:
        Lazy(x).other
    except AttributeError as e:
        return x + 1, e.args
    return x


NAMESPACE = types.SimpleNamespace(a=1)


def missing_attribute_of_a_c_type_names_its_module(x):
    try:
        v = NAMESPACE.b
    except AttributeError as e:
        return x + 1, str(e)
    return x * v


@pytest.mark.parametrize("fn", [hasattr_through_getattr_hook, missing_attribute_of_a_c_type_names_its_module, property_error_falls_back_to_getattr,
                                missing_attribute_of_an_object_caught, user_getattr_error_caught_with_its_args],
                         ids=lambda f: f.__name__)
def test_attribute_errors_in_one_graph(fn):
    captured_in_one_graph(fn, torch.randn(3))


def test_missing_tensor_attribute_caught():
    def f(x):
        try:
            v = x.no_such_attribute
        except AttributeError as e:
            return x * 2, str(e)
        return x * v

    captured_in_one_graph(f, torch.randn(3))


def test_a_tensor_attribute_set_outside_is_found():
    def f(x):
        try:
            v = x.tag
        except AttributeError:
            v = 2
        return x * v

    t = torch.ones(2)
    t.tag = 5
    assert torch.equal(dynacap.optimize(f, backend=CountingBackend())(t), t * 5)
    assert torch.equal(dynacap.optimize(f, backend=CountingBackend())(torch.ones(2)), torch.ones(2) * 2)


def unpack_too_many(x):
    try:
        a, _ = [x, x, x]
    except ValueError as e:
        return x + 1, str(e)
    return a


def unpack_too_few(x):
    try:
        a, b, c = (x, x)
    except ValueError as e:
        return x + 1, str(e)
    return a


@pytest.mark.parametrize("fn", [unpack_too_many, unpack_too_few], ids=lambda f: f.__name__)
def test_unpacking_errors_in_one_graph(fn):
    captured_in_one_graph(fn, torch.randn(3))


def test_exception_text_through_its_own_str():
    class Described(Exception):
        def __str__(self):
            return f"described({self.args[0]})"

    def f(x):
        e = Described(5)
        try:
            raise e
        except Described as caught:
            text = f"{caught}" + caught.__str__()
        return x + 1, text

    run_differential(f, torch.zeros(2))


# -- unbound names ---------------------------------------------------------------------------------------------
def unbound_local_caught(x):
    if x.shape[0] > 10:
        z = 1
    try:
        return x * z
    except UnboundLocalError as e:
        return x + 1, str(e)


def free_variable_not_yet_assigned(x):
    def h():
        return w

    try:
        h()
    except NameError as e:
        seen = str(e)
    w = 1
    return x + w, seen


def cell_variable_read_before_assignment(x):
    def h():
        return w

    try:
        w
    except UnboundLocalError as e:
        seen = str(e)
    w = 2
    return x + w + h(), seen


def delete_of_an_unbound_local(x):
    y = 1
    del y
    try:
        del y
    except UnboundLocalError as e:
        return x + 1, str(e)
    return x


@pytest.mark.parametrize("fn", [unbound_local_caught, free_variable_not_yet_assigned,
                                cell_variable_read_before_assignment, delete_of_an_unbound_local],
                         ids=lambda f: f.__name__)
def test_unbound_names_in_one_graph(fn):
    captured_in_one_graph(fn, torch.randn(3))


def test_unbound_local_escapes_as_eager():
    def f(x):
        if x.shape[0] > 10:
            z = 1
        return x * z

    run_differential(f, torch.zeros(2))


# -- numbers iterated or called --------------------------------------------------------------------------------
def loop_over_a_number(x):
    try:
        for v in 5:
            x = x + v
    except TypeError as e:
        return x + 1, str(e)
    return x


def call_of_none(x):
    f = None
    try:
        f(x)
    except TypeError as e:
        return x + 1, str(e)
    return x


@pytest.mark.parametrize("fn", [loop_over_a_number, call_of_none], ids=lambda f: f.__name__)
def test_type_errors_in_one_graph(fn):
    captured_in_one_graph(fn, torch.randn(3))
