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
from ..values.containers import SequenceValue, TupleValue
from ..values.context_managers import enter_context
from ..values.exceptions import CALLERS, ExceptionGroupValue, ExceptionValue, TracebackValue, callers_exception, \
    group_of, is_exception_class, make_exception, python_error, raising
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
            handled = callers_exception(tx)
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


def _is_none(value: Value) -> bool:
    return value.is_constant() and value.as_constant() is None


@handles("CHECK_EG_MATCH")
def _check_eg_match(tx, ins):
    """``except* classes``: split the exception into the part it catches and the rest (CPython's
    ``exception_group_match``); the part caught is the one being handled."""
    classes = _exception_classes(tx.pop())
    if any(issubclass(c, BaseExceptionGroup) for c in classes):
        raise python_error(TypeError, "catching ExceptionGroup with except* is not allowed. Use except instead.")
    exception = tx.stack[-1]
    if _is_none(exception):
        match = rest = None
    elif not isinstance(exception, ExceptionValue):
        raise GraphBreak(f"`except*` matching {exception.describe()} is not captured")
    elif issubclass(exception.cls, classes):
        rest = None
        if isinstance(exception, ExceptionGroupValue):
            match = exception
        else:  # a naked exception, caught wrapped in a group
            match = group_of("", [exception], TupleValue([exception]))
            match.traceback = exception.traceback
    elif isinstance(exception, ExceptionGroupValue):
        match, rest = exception.split(lambda e: issubclass(e.cls, classes))
    else:
        match = rest = None
    if match is None:
        tx.push(ConstantValue(None))
        return
    tx.stack[-1] = rest if rest is not None else ConstantValue(None)
    tx.push(match)
    tx.ctx.exc_info = match


@handles("PREP_RERAISE_STAR")
def _prep_reraise_star(tx, ins):
    """What leaves the ``except*`` clauses (CPython's ``_PyExc_PrepReraiseStar``): what they raised, and
    what they re-raised or left unmatched as one projection of the original group."""
    excs, orig = tx.pop(), tx.pop()
    items = excs.items
    if not items:
        tx.push(ConstantValue(None))
        return
    if not isinstance(orig, ExceptionGroupValue):
        tx.push(items[0])  # a naked exception: one clause ran, at most one exception to raise
        return
    if not all(isinstance(e, ExceptionValue) or _is_none(e) for e in items):
        raise GraphBreak("`except*` clauses that raised values not known at capture time")
    raised, reraised = [], []
    for e in items:
        if isinstance(e, ExceptionValue):
            same = e.traceback is orig.traceback and e.cause is orig.cause and e.context is orig.context \
                and e.attributes.get("__notes__") is orig.attributes.get("__notes__")
            (reraised if same else raised).append(e)
    kept = {id(leaf) for e in reraised
            for leaf in (e.leaves() if isinstance(e, ExceptionGroupValue) else [e])}
    projection = orig.split(lambda e: id(e) in kept)[0] if kept else None
    if not raised:
        tx.push(projection if projection is not None else ConstantValue(None))
        return
    if projection is not None:
        raised.append(projection)
    tx.push(group_of("", raised) if len(raised) > 1 else raised[0])


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
