"""Exceptions and ``with`` blocks: ``raise``, handlers entered from the exception table, ``BEFORE_WITH``.

An exception Python raises while tracing (``raise``, or an instruction a value
kind knows raises: ``values.exceptions.PythonError``) is unwound by the
tracer's main loop into the handler of the frame's exception table
(``Tracer.catch``); the handler's opcodes run here: ``PUSH_EXC_INFO``,
``CHECK_EXC_MATCH``, ``POP_EXCEPT``, ``RERAISE``, ``WITH_EXCEPT_START``.
``TraceContext.exc_info`` is the exception being handled, as CPython's
``exc_info``.  An exception no traced handler catches is a graph break at
the instruction that raised, which then runs eagerly.  Exceptions a graph
operation raises at run time are never seen here (the graph runs outside
the frame's handlers; see ``TraceContext.keep_program_order``).
"""
from __future__ import annotations

from ..errors import GraphBreak
from ..values.base import Value
from ..values.constant import ConstantValue
from ..values.containers import SequenceValue
from ..values.context_managers import enter_context
from ..values.exceptions import CALLERS, ExceptionValue, TracebackValue, is_exception_class, make_exception, \
    python_error, raising
from .tracer import handles


def exception_of(tx, value: Value, what: str = "exceptions") -> ExceptionValue:
    """What ``raise value`` raises: an exception instance, or a class called without arguments."""
    if isinstance(value, ExceptionValue):
        return value
    if is_exception_class(value):
        return make_exception(tx, value.as_constant(), [], {}, value.source)
    if value.is_constant():
        raise python_error(TypeError, f"{what} must derive from BaseException")
    raise GraphBreak(f"`raise {value.describe()}` is not captured")


@handles("RAISE_VARARGS")
def _raise_varargs(tx, ins):
    if ins.arg == 0:
        handled = tx.ctx.exc_info
        if handled is CALLERS:
            raise GraphBreak("a bare `raise` outside an except block of the captured code re-raises the "
                             "exception its caller is handling: it runs eagerly")
        if not isinstance(handled, ExceptionValue):
            raise python_error(RuntimeError, "No active exception to reraise")
        raise raising(handled, reraise=True)
    cause = tx.pop() if ins.arg == 2 else None
    exception = exception_of(tx, tx.pop())
    if cause is not None:
        if isinstance(cause, ConstantValue) and cause.value is None:
            exception.set_cause(cause)
        else:
            exception.set_cause(exception_of(tx, cause, "exception causes"))
    raise raising(exception)


@handles("LOAD_ASSERTION_ERROR")
def _load_assertion_error(tx, ins):
    tx.push(ConstantValue(AssertionError))


@handles("RERAISE")
def _reraise(tx, ins):
    exception = tx.pop()
    if not isinstance(exception, ExceptionValue):
        raise GraphBreak(f"re-raising {exception.describe()} is not captured")
    raise raising(exception, reraise=True)


@handles("PUSH_EXC_INFO")
def _push_exc_info(tx, ins):
    exception = tx.pop()
    ctx = tx.ctx
    tx.push(ctx.exc_info)
    ctx.exc_info = exception
    tx.push(exception)


@handles("POP_EXCEPT")
def _pop_except(tx, ins):
    tx.ctx.exc_info = tx.pop()


def _exception_classes(value: Value) -> tuple:
    if isinstance(value, SequenceValue) and value.python_type() is tuple:
        return tuple(c for item in value.items for c in _exception_classes(item))
    if is_exception_class(value):
        return (value.as_constant(),)
    raise GraphBreak(f"`except {value.describe()}`: catching classes that do not inherit from BaseException "
                     "is not allowed (TypeError at run time)")


@handles("CHECK_EXC_MATCH")
def _check_exc_match(tx, ins):
    classes = _exception_classes(tx.pop())
    exception = tx.stack[-1]
    if not isinstance(exception, ExceptionValue):
        raise GraphBreak(f"`except` matching {exception.describe()} is not captured")
    tx.push(ConstantValue(issubclass(exception.cls, classes)))


@handles("WITH_EXCEPT_START")
def _with_except_start(tx, ins):
    """``__exit__(type(e), e, tb)`` of the block an exception leaves; its result says whether to swallow it."""
    exit_fn, exception = tx.stack[-4], tx.stack[-1]
    if not isinstance(exception, ExceptionValue):
        raise GraphBreak(f"a with block left by {exception.describe()} is not captured")
    calling, tx.calling = tx.calling, False  # its result is not a CALL's
    try:
        result = exit_fn.call(tx, [ConstantValue(exception.cls), exception, TracebackValue()], {})
    finally:
        tx.calling = calling
    tx.push(result)


@handles("BEFORE_WITH")
def _before_with(tx, ins):
    exit_value, result = enter_context(tx, tx.pop())
    tx.push(exit_value)
    tx.push(result)
