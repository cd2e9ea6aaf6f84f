"""Opcodes that call: ``CALL`` (with ``KW_NAMES``), ``CALL_FUNCTION_EX``, ``MAKE_FUNCTION``."""
from __future__ import annotations

import types

from ..errors import GraphBreak
from ..values.base import NullValue, Value
from ..values.containers import DictValue, SequenceValue, TupleValue
from ..values.context_managers import make_modelled
from ..values.exceptions import is_exception_class, make_exception, python_error, tp_name
from ..values.functions import BoundMethodValue, MadeFunction, UserFunctionValue
from .ops_variables import CellRefValue, CodeConstant
from .tracer import handles


def call_value(tx, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """Call ``fn``; an inlined callee's result is this instruction's result (see ``Tracer.direct_call``)."""
    made = _made_here(tx, fn, args, kwargs)
    if made is not None:
        return made
    tx.calling = True
    try:
        return fn.call(tx, args, kwargs)
    finally:
        tx.calling = False


def _made_here(tx, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """Calls whose result is a value kind of the trace: exceptions, modelled context managers."""
    if not fn.is_constant():  # what each case below asks first
        return None
    if is_exception_class(fn):
        return make_exception(tx, fn.as_constant(), args, kwargs, fn.source)
    if fn.is_constant() and isinstance(fn.as_constant(), type):
        return make_modelled(fn.as_constant(), args, kwargs)
    if fn.is_constant() and type(fn.as_constant()) in (int, float, bool, complex, str, bytes, tuple, type(None)):
        raise python_error(TypeError, f"'{tp_name(type(fn.as_constant()))}' object is not callable")
    return None


@handles("KW_NAMES")
def _kw_names(tx, ins):
    tx.kw_names = tx.code.co_consts[ins.arg]


@handles("CALL")
def _call(tx, ins):
    args = tx.popn(ins.arg)
    second = tx.pop()
    first = tx.pop()
    if isinstance(first, NullValue):
        fn = second
    else:
        fn, args = first, [second, *args]
    kwargs = {}
    if tx.kw_names:
        names = tx.kw_names
        kwargs = dict(zip(names, args[len(args) - len(names):]))
        args = args[: len(args) - len(names)]
        tx.kw_names = None
    tx.push(call_value(tx, fn, args, kwargs))


@handles("CALL_FUNCTION_EX")
def _call_function_ex(tx, ins):
    kwargs = tx.pop() if ins.arg & 1 else DictValue({})
    args = tx.pop()
    fn = tx.pop()
    null = tx.pop()
    if not isinstance(null, NullValue):
        raise GraphBreak("CALL_FUNCTION_EX without NULL")
    if not isinstance(args, SequenceValue):
        args = TupleValue(args.iterate(tx))
    if not isinstance(kwargs, DictValue):
        raise GraphBreak(f"`**` unpacking of {kwargs.describe()}")
    if not all(type(k) is str for k in kwargs.items):
        if not isinstance(fn, (UserFunctionValue, BoundMethodValue)):
            raise GraphBreak(f"`**` unpacking of a dict with keys that are not strings into {fn.describe()}")
        # Python functions check the keywords when binding them (a C function may check its arguments first).
        raise python_error(TypeError, "keywords must be strings",
                           reason="`**` unpacking of a dict with keys that are not strings (TypeError at run time)")
    tx.push(call_value(tx, fn, list(args.items), dict(kwargs.items)))


@handles("MAKE_FUNCTION")
def _make_function(tx, ins):
    code_value = tx.pop()
    assert isinstance(code_value, CodeConstant)
    flags = ins.arg
    closure = tx.pop() if flags & 0x08 else None
    annotations = tx.pop() if flags & 0x04 else None
    kwdefaults = tx.pop() if flags & 0x02 else None
    defaults = tx.pop() if flags & 0x01 else None
    code = code_value.code
    # The trace-time function holds the defaults for inspect.signature (binding inlined calls): the
    # constants themselves, else their values (bound arguments that are already a Value are used as is).
    defaults_t, kwdefaults_d, constant = None, None, True
    if defaults is not None:
        items = defaults.iterate(tx)
        constant = all(v.is_constant() for v in items)
        defaults_t = tuple(v.as_constant() if constant else v for v in items)
    if kwdefaults is not None:
        if not isinstance(kwdefaults, DictValue):
            raise GraphBreak(f"nested function {code.co_name} with keyword-only defaults of {kwdefaults.describe()}")
        kw_constant = all(v.is_constant() for v in kwdefaults.items.values())
        constant = constant and kw_constant
        kwdefaults_d = {str(k): v.as_constant() if kw_constant else v for k, v in kwdefaults.items.items()}
    boxes = None
    cells = None
    if closure is not None:
        boxes = [c.box for c in closure.items if isinstance(c, CellRefValue)]
        cells = tuple(types.CellType() for _ in boxes)
    fn = types.FunctionType(code, tx.f_globals, code.co_name, defaults_t, cells)
    if boxes is not None:
        tx.ctx.made_closures[id(fn)] = (fn, boxes)
    if kwdefaults_d:
        fn.__kwdefaults__ = kwdefaults_d
    fn.__qualname__ = code.co_qualname
    made = MadeFunction(code, tx.f_globals, defaults, kwdefaults, _annotations(tx, annotations), constant)
    tx.push(UserFunctionValue(fn, None, closure_cells=boxes if boxes is not None else None, made=made))


def _annotations(tx, annotations: Value | None) -> DictValue:
    """``MAKE_FUNCTION``'s annotations (a tuple of name, value, name, value...) as the function's dict."""
    if annotations is None:
        return DictValue({})
    items = annotations.iterate(tx)
    return DictValue({items[i].as_constant(): items[i + 1] for i in range(0, len(items), 2)})
