"""Exception handlers and context managers at their corners: finally vs return, __exit__ order, PEP 479."""
import contextlib
import io
import sys

from . import construct


class Noisy:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def __enter__(self):
        self.log.append(f"enter {self.name}")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(f"exit {self.name} {exc_type.__name__ if exc_type else None}")
        return False


class Replacing:
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        raise KeyError("from exit")


class Described(Exception):
    def __str__(self):
        return f"described({self.args[0]})"


@contextlib.contextmanager
def swallowing(log):
    try:
        yield
    except ValueError as e:
        log.append(f"swallowed {e}")


@contextlib.contextmanager
def failing_after_yield():
    yield 1
    raise RuntimeError("after yield")


@construct()
def finally_overrides_return(x):
    def f(t):
        try:
            return t + 1
        finally:
            return t - 1  # noqa: B012 (the construct: finally's return wins)

    return f(x)


@construct()
def finally_swallows_exception_by_return(x):
    def f(t):
        try:
            raise ValueError("lost")
        finally:
            return t * 2  # noqa: B012

    return f(x)


@construct()
def exception_in_else_not_caught_here(x):
    log = []
    try:
        try:
            log.append("body")
        except KeyError:
            log.append("wrong handler")
        else:
            raise KeyError("from else")
    except KeyError:
        log.append("outer")
    return x + 1, log


@construct()
def except_variable_unbound_after(x):
    try:
        raise ValueError("v")
    except ValueError as e:
        msg = str(e)
    return x + 1, msg, "e" in dir()


@construct()
def exc_info_inside_handler(x):
    try:
        raise KeyError("k")
    except KeyError:
        kind = sys.exc_info()[0].__name__
    return x + 1, kind, sys.exc_info()[0] is None


@construct()
def handler_raises_new_context(x):
    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise ValueError("second")
    except ValueError as e:
        return x + 1, str(e), repr(e.__context__), e.__suppress_context__


@construct()
def raise_from_none(x):
    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise ValueError("second") from None
    except ValueError as e:
        return x + 1, e.__cause__ is None, e.__suppress_context__


@construct()
def raise_class_not_instance(x):
    try:
        raise ValueError
    except ValueError as e:
        return x + 1, e.args, str(e)


@construct()
def exception_args_and_str(x):
    e1, e2, e3 = ValueError("a", 2), KeyError("k"), Described(5)
    return x + 1, str(e1), repr(e1), str(e2), str(e3), e1.args


@construct()
def stopiteration_in_generator_is_runtimeerror(x):
    def gen():
        yield 1
        next(iter([]))

    try:
        list(gen())
    except RuntimeError as e:
        return x + 1, str(e)
    return x


@construct()
def exception_in_comprehension(x):
    try:
        [1 // v for v in [1, 0]]
    except ZeroDivisionError as e:
        return x + 1, str(e)
    return x


@construct()
def exception_isinstance_tuple(x):
    try:
        int("q")
    except (TypeError, ValueError) as e:
        return x + isinstance(e, ValueError), type(e).__name__


@construct()
def try_finally_continue_in_loop(x):
    log = []
    for i in range(3):
        try:
            if i == 1:
                continue
            log.append(i)
        finally:
            log.append(f"f{i}")
    return x * len(log), log


@construct()
def try_finally_break_in_loop(x):
    log = []
    for i in range(3):
        try:
            if i == 1:
                break
        finally:
            log.append(f"f{i}")
    return x * len(log), log


@construct()
def with_return_inside_calls_exit(x):
    log = []

    def f(t):
        with Noisy(log, "a"):
            return t * 2

    return f(x), log


@construct()
def with_in_loop_break_continue(x):
    log = []
    for i in range(3):
        with Noisy(log, str(i)):
            if i == 0:
                continue
            if i == 2:
                break
    return x + len(log), log


@construct()
def nested_with_exit_order_on_error(x):
    log = []
    try:
        with Noisy(log, "outer"), Noisy(log, "inner"):
            raise ValueError("v")
    except ValueError:
        log.append("caught")
    return x + 1, log


@construct()
def exit_raises_replaces_exception(x):
    try:
        with Replacing():
            raise ValueError("original")
    except KeyError as e:
        return x + 1, str(e), type(e.__context__).__name__
    return x


@construct()
def contextmanager_swallows(x):
    log = []
    with swallowing(log):
        raise ValueError("v")
    return x + 1, log


@construct()
def contextmanager_raises_after_yield(x):
    try:
        with failing_after_yield() as v:
            y = x * v
    except RuntimeError as e:
        return y, str(e)
    return y


@construct()
def exitstack_suppressing_exit(x):
    log = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.suppress(KeyError))
        stack.callback(log.append, "cb")
        raise KeyError("k")
    return x + 1, log


@construct()
def exitstack_pop_all(x):
    log = []
    with contextlib.ExitStack() as stack:
        stack.callback(log.append, "moved")
        later = stack.pop_all()
    log.append("after with")
    later.close()
    return x + 1, log


@construct()
def suppress_multiple_types(x):
    log = []
    for exc in (KeyError, IndexError):
        with contextlib.suppress(KeyError, IndexError):
            log.append(exc.__name__)
            raise exc("e")
    return x + len(log), log


@construct()
def redirect_stdout_captures(x):
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        print("inside")
    return x + 1, buffer.getvalue()


@construct()
def assert_message_evaluated_lazily(x):
    log = []

    def message():
        log.append("evaluated")
        return "m"

    assert x.shape[0] == 4, message()
    return x + 1, log


@construct()
def except_star_group(x):
    caught = []
    try:
        raise ExceptionGroup("g", [ValueError("a"), KeyError("b")])
    except* ValueError as eg:
        caught.append(len(eg.exceptions))
    except* KeyError:
        caught.append("key")
    return x + 1, caught


@construct()
def exception_notes(x):
    try:
        e = ValueError("v")
        e.add_note("more")
        raise e
    except ValueError as err:
        return x + 1, err.__notes__


@construct()
def generator_close_runs_finally(x):
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
    return x + 1, log
