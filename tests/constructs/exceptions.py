"""Exceptions raised by Python during tracing, assert, and context managers of every kind."""
import contextlib

import torch

from . import construct


class ShapeError(ValueError):
    pass


class Tracker:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append("exit" if exc_type is None else f"exit:{exc_type.__name__}")
        return False


class Swallow:
    def __enter__(self):
        return 5

    def __exit__(self, exc_type, exc, tb):
        return exc_type is not None and issubclass(exc_type, KeyError)


@contextlib.contextmanager
def scaled(k):
    yield k * 2


@contextlib.contextmanager
def logged(log):
    log.append("in")
    try:
        yield
    finally:
        log.append("out")


def check(t):
    if t.dim() != 1:
        raise ShapeError(f"expected 1-D, got {t.dim()}-D")
    return t


# -- raise / try -------------------------------------------------------------------------------------------
@construct()
def try_except_raise(x):
    try:
        raise ValueError("bad")
    except ValueError:
        return x + 1


@construct()
def try_except_as_message(x):
    try:
        raise KeyError("k")
    except KeyError as e:
        return x + 1, str(e), e.args


@construct()
def try_except_subclass(x):
    try:
        check(x.reshape(2, 2))
    except ValueError as e:
        return x * 2, type(e).__name__, str(e)
    return x


@construct()
def try_no_exception_else(x):
    try:
        y = check(x)
    except ShapeError:
        y = x * 0
    else:
        y = y + 10
    return y


@construct()
def try_finally_runs(x):
    log = []
    try:
        y = x + 1
    finally:
        log.append("finally")
    return y, log


@construct()
def try_except_finally_order(x):
    log = []
    try:
        log.append("try")
        raise RuntimeError("r")
    except RuntimeError:
        log.append("except")
        y = x * 2
    finally:
        log.append("finally")
    return y, log


@construct()
def except_tuple_of_types(x):
    try:
        {}["missing"]
    except (IndexError, KeyError):
        return x - 1
    return x


@construct()
def int_parse_valueerror(x):
    try:
        n = int("zz")
    except ValueError:
        n = 3
    return x * n


@construct()
def index_error_caught(x):
    xs = [1, 2]
    try:
        v = xs[5]
    except IndexError:
        v = -1
    return x * v


@construct()
def attribute_error_caught(x):
    try:
        v = x.no_such_attribute
    except AttributeError:
        v = 2
    return x * v


@construct()
def zero_division_caught(x):
    try:
        v = 1 / 0
    except ZeroDivisionError:
        v = 4
    return x * v


@construct()
def nested_try_reraise(x):
    try:
        try:
            raise ValueError("inner")
        except ValueError:
            raise
    except ValueError as e:
        return x * 3, str(e)


@construct()
def raise_from(x):
    try:
        try:
            raise KeyError("a")
        except KeyError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        return x + 1, str(e), type(e.__cause__).__name__


@construct()
def exception_context(x):
    try:
        try:
            raise KeyError("a")
        except KeyError:
            raise ValueError("b")
    except ValueError as e:
        return x + 1, type(e.__context__).__name__


@construct()
def try_in_loop_continue(x):
    total = x
    for v in [1, 0, 2]:
        try:
            total = total + 1 / v
        except ZeroDivisionError:
            continue
    return total


@construct()
def user_exception_attrs(x):
    class Stop(Exception):
        def __init__(self, value):
            super().__init__(value)
            self.value = value

    try:
        raise Stop(x * 2)
    except Stop as e:
        return e.value + 1


@construct()
def return_in_finally_order(x):
    log = []

    def f(t):
        try:
            return t + 1
        finally:
            log.append("cleanup")

    return f(x), log


@construct()
def isinstance_exception(x):
    e = ShapeError("s")
    return x + isinstance(e, ValueError) + issubclass(ShapeError, Exception) * 2


# -- StopIteration, assert ------------------------------------------------------------------------------------
@construct()
def next_stopiteration_caught(x):
    it = iter([x])
    first = next(it)
    try:
        next(it)
    except StopIteration:
        return first * 2
    return first


@construct()
def generator_exhausted(x):
    def gen():
        yield x
    g = gen()
    next(g)
    try:
        next(g)
        return x
    except StopIteration:
        return x + 5


@construct()
def assert_true(x):
    assert x.dim() == 1, "need a vector"
    return x * 2


@construct()
def assert_caught(x):
    try:
        assert x.dim() == 3, "need 3-D"
    except AssertionError as e:
        return x + 1, str(e)
    return x * 2


# -- with ---------------------------------------------------------------------------------------------------------
@construct()
def with_user_context_manager(x):
    t = Tracker()
    with t as same:
        y = x * 2
    return y, t.log, same is t


@construct()
def with_exit_sees_exception(x):
    t = Tracker()
    try:
        with t:
            raise KeyError("k")
    except KeyError:
        pass
    return x + 1, t.log


@construct()
def with_exit_suppresses(x):
    with Swallow() as v:
        raise KeyError("gone")
    return x * v


@construct()
def contextmanager_yield_value(x):
    with scaled(3) as k:
        return x * k


@construct()
def contextmanager_finally(x):
    log = []
    with logged(log):
        y = x + 1
    return y, log


@construct()
def contextmanager_exception_inside(x):
    log = []
    try:
        with logged(log):
            raise ValueError("v")
    except ValueError:
        pass
    return x * 2, log


@construct()
def nullcontext_with(x):
    with contextlib.nullcontext(x) as t:
        return t * 3


@construct()
def nullcontext_conditional(x, train=False):
    ctx = torch.no_grad() if not train else contextlib.nullcontext()
    with ctx:
        return x * 2


@construct()
def suppress_keyerror(x):
    d = {}
    with contextlib.suppress(KeyError):
        x = x + d["missing"]
    return x + 1


@construct()
def exitstack_callbacks(x):
    log = []
    with contextlib.ExitStack() as stack:
        stack.callback(log.append, "first")
        stack.callback(log.append, "second")
        y = x * 2
    return y, log


@construct()
def exitstack_enter_context(x):
    t1, t2 = Tracker(), Tracker()
    with contextlib.ExitStack() as stack:
        stack.enter_context(t1)
        stack.enter_context(t2)
        y = x + 1
    return y, t1.log, t2.log


@construct()
def nested_with(x):
    t1, t2 = Tracker(), Tracker()
    with t1, t2:
        y = x - 1
    return y, t1.log + t2.log


@construct()
def with_no_grad_inside_user_cm(x):
    with Tracker():
        with torch.no_grad():
            y = x * 2
    return y
