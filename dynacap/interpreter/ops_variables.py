"""Opcodes that move values: locals, cells, globals, attributes, constants, stack shuffles."""
from __future__ import annotations

import sys
import types

from ..errors import GraphBreak
from ..source import LocalSource
from ..values.base import NullValue, Value
from ..values.constant import ConstantValue, is_literal
from ..values.wrap import wrap
from .tracer import CellBox, handles


@handles("NOP", "RESUME", "PRECALL", "EXTENDED_ARG")
def _nop(tx, ins):
    pass


@handles("PUSH_NULL")
def _push_null(tx, ins):
    tx.push(NullValue())


@handles("POP_TOP")
def _pop_top(tx, ins):
    tx.pop()


@handles("COPY")
def _copy(tx, ins):
    tx.push(tx.stack[-ins.arg])


@handles("SWAP")
def _swap(tx, ins):
    tx.stack[-1], tx.stack[-ins.arg] = tx.stack[-ins.arg], tx.stack[-1]


@handles("LOAD_CONST")
def _load_const(tx, ins):
    value = ins.argval
    if isinstance(value, types.CodeType):
        tx.push(CodeConstant(value))
    elif is_literal(value):
        tx.push(ConstantValue(value))
    else:
        # Objects that dynacap itself placed in generated code (a context class, a function).
        tx.push(wrap(tx, value, None))


class CodeConstant(Value):
    """A code object on the stack, waiting for ``MAKE_FUNCTION``."""

    def __init__(self, code):
        self.code = code

    def describe(self):
        return f"code of {self.code.co_name}"


def read_local(tx, name: str) -> Value:
    if name in tx.locals:
        return tx.locals[name]
    if name.startswith(".") and name[1:].isdigit() and f"implicit{name[1:]}" in tx.locals:
        # A comprehension's iterator argument `.0`: inspect.signature (which binds the arguments
        # of inlined calls) names it `implicit0`.
        return tx.locals[f"implicit{name[1:]}"]
    if tx.is_root and name in tx.frame_values and name not in tx.deleted:
        value = wrap(tx, tx.frame_values[name], LocalSource(name))
        tx.locals[name] = value
        return value
    raise GraphBreak(f"local variable {name!r} is read before assignment (UnboundLocalError at run time)")


@handles("LOAD_FAST")
def _load_fast(tx, ins):
    tx.push(read_local(tx, ins.argval))


@handles("STORE_FAST")
def _store_fast(tx, ins):
    tx.locals[ins.argval] = tx.pop()
    tx.deleted.discard(ins.argval)


@handles("DELETE_FAST")
def _delete_fast(tx, ins):
    read_local(tx, ins.argval)
    tx.locals.pop(ins.argval, None)
    tx.deleted.add(ins.argval)


@handles("MAKE_CELL")
def _make_cell(tx, ins):
    name = ins.argval
    if tx.is_root and name in tx.frame_values:
        tx.cells[name] = CellBox(source=LocalSource(name), raw=tx.frame_values[name])
    elif name in tx.locals:
        tx.cells[name] = CellBox(tx.locals.pop(name))
    else:
        tx.cells[name] = CellBox(None)


@handles("COPY_FREE_VARS")
def _copy_free_vars(tx, ins):
    if tx.is_root:
        for name in tx.code.co_freevars:
            if name in tx.frame_values:
                tx.cells[name] = CellBox(source=LocalSource(name, is_free=True), raw=tx.frame_values[name])
            else:
                tx.cells[name] = CellBox(None)


def _cell(tx, name) -> CellBox:
    box = tx.cells.get(name)
    if box is None:
        raise GraphBreak(f"closure variable {name!r} is not available")
    return box


@handles("LOAD_DEREF", "LOAD_CLASSDEREF")
def _load_deref(tx, ins):
    value = _cell(tx, ins.argval).get(tx)
    if value is None:
        raise GraphBreak(f"free variable {ins.argval!r} is read before assignment (NameError at run time)")
    tx.push(value)


@handles("STORE_DEREF")
def _store_deref(tx, ins):
    box = _cell(tx, ins.argval)
    if box.source is not None and not (tx.is_root and ins.argval in tx.code.co_cellvars):
        raise GraphBreak(f"assigning the closure variable {ins.argval!r} of an enclosing function (nonlocal)")
    box.set(tx.pop())


@handles("DELETE_DEREF")
def _delete_deref(tx, ins):
    """``del x`` of a cell variable: the cell becomes empty, as ``STORE_DEREF`` fills it."""
    box = _cell(tx, ins.argval)
    if box.source is not None and not (tx.is_root and ins.argval in tx.code.co_cellvars):
        raise GraphBreak(f"deleting the closure variable {ins.argval!r} of an enclosing function (nonlocal)")
    if box.get(tx) is None:
        raise GraphBreak(f"free variable {ins.argval!r} is deleted before assignment (NameError at run time)")
    box.set(None)


@handles("LOAD_CLOSURE")
def _load_closure(tx, ins):
    tx.push(CellRefValue(_cell(tx, ins.argval)))


class CellRefValue(Value):
    """A cell pushed by ``LOAD_CLOSURE`` for a nested function being created."""

    def __init__(self, box: CellBox):
        self.box = box

    def describe(self):
        return "closure cell"


@handles("LOAD_GLOBAL")
def _load_global(tx, ins):
    if ins.arg & 1:
        tx.push(NullValue())
    tx.push(tx.load_global(ins.argval))


@handles("STORE_GLOBAL")
def _store_global(tx, ins):
    tx.store_global(ins.argval, tx.pop())


@handles("LOAD_ATTR")
def _load_attr(tx, ins):
    obj = tx.pop()
    tx.push(obj.getattr(tx, ins.argval))


@handles("LOAD_METHOD")
def _load_method(tx, ins):
    obj = tx.pop()
    tx.push(NullValue())
    tx.push(obj.getattr(tx, ins.argval))


@handles("STORE_ATTR")
def _store_attr(tx, ins):
    obj = tx.pop()
    value = tx.pop()
    obj.setattr(tx, ins.argval, value)


@handles("IMPORT_NAME")
def _import_name(tx, ins):
    fromlist = tx.pop().as_constant()
    level = tx.pop().as_constant()
    name = ins.argval
    if level != 0 or name not in sys.modules:
        raise GraphBreak(f"`import {name}` inside the captured code (only already-imported absolute modules)")
    module = sys.modules[name] if fromlist else sys.modules[name.partition(".")[0]]
    tx.push(wrap(tx, module, None))


@handles("IMPORT_FROM")
def _import_from(tx, ins):
    tx.push(tx.stack[-1].getattr(tx, ins.argval))
