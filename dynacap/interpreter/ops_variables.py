"""Opcodes that move values: locals, cells, globals, attributes, constants, stack shuffles."""
from __future__ import annotations

import importlib
import sys
import types

from ..errors import GraphBreak
from ..source import LocalSource
from ..values.base import DELETED, NullValue, Value
from ..values.constant import ConstantValue, is_literal
from ..values.exceptions import python_error
from ..values.wrap import wrap
from .call_frames import CellBox
from .tracer import handles


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


@handles("LOAD_FAST")
def _load_fast(tx, ins):
    tx.push(tx.read_local(ins.argval))


@handles("STORE_FAST")
def _store_fast(tx, ins):
    tx.locals[ins.argval] = tx.pop()
    tx.deleted.discard(ins.argval)


@handles("DELETE_FAST")
def _delete_fast(tx, ins):
    tx.read_local(ins.argval)
    tx.locals.pop(ins.argval, None)
    tx.deleted.add(ins.argval)


class FrameCell(CellBox):
    """A cell variable's cell (``MAKE_CELL``), knowing the frame that made it: once that frame has returned in
    the trace, no code of it runs after the graph, so closures made here may get a new cell in its place
    (``values.functions``)."""

    def __init__(self, owner, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.owner = owner

    def frame_returned(self) -> bool:
        return self.owner.return_value is not None

    def unread(self) -> bool:
        """Whether the contents are still the frame's argument, never read nor changed by the trace."""
        return self._raw is not CellBox._UNREAD


@handles("MAKE_CELL")
def _make_cell(tx, ins):
    name = ins.argval
    if tx.is_root and name in tx.frame_values:
        tx.cells[name] = FrameCell(tx, source=LocalSource(name), raw=tx.frame_values[name])
    elif name in tx.locals:
        tx.cells[name] = FrameCell(tx, tx.locals.pop(name))
    else:
        tx.cells[name] = FrameCell(tx, None)


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
        name = ins.argval
        if name in tx.code.co_cellvars:
            raise python_error(UnboundLocalError, f"cannot access local variable '{name}' where it is not "
                                                  "associated with a value",
                               reason=f"local variable {name!r} is read before assignment (UnboundLocalError at run "
                                      "time)")
        raise python_error(NameError, f"cannot access free variable '{name}' where it is not associated with a "
                                      "value in enclosing scope",
                           reason=f"free variable {name!r} is read before assignment (NameError at run time)")
    tx.push(value)


@handles("STORE_DEREF")
def _store_deref(tx, ins):
    box = _cell(tx, ins.argval)
    if box.source is not None and not (tx.is_root and ins.argval in tx.code.co_cellvars):
        raise GraphBreak(f"assigning the closure variable {ins.argval!r} of an enclosing function (nonlocal)")
    box.set(tx.pop())
    tx.deleted.discard(ins.argval)


@handles("DELETE_DEREF")
def _delete_deref(tx, ins):
    """``del x`` of a cell variable: the cell becomes empty, as ``STORE_DEREF`` fills it."""
    box = _cell(tx, ins.argval)
    if box.source is not None and not (tx.is_root and ins.argval in tx.code.co_cellvars):
        raise GraphBreak(f"deleting the closure variable {ins.argval!r} of an enclosing function (nonlocal)")
    if box.get(tx) is None:
        raise GraphBreak(f"free variable {ins.argval!r} is deleted before assignment (NameError at run time)")
    box.set(None)
    tx.deleted.add(ins.argval)  # an argument held in a cell: a resume must not reload it from the frame


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


@handles("DELETE_GLOBAL")
def _delete_global(tx, ins):
    """``del g`` (``global g``): replayed after the graph like ``STORE_GLOBAL``; later reads see it missing."""
    name = ins.argval
    override = tx.ctx.global_overrides.get((id(tx.f_globals), name))
    if override is DELETED or override is None and name not in tx.f_globals:
        raise GraphBreak(f"`del {name}`: name {name!r} is not defined (NameError at run time)")
    if override is None:
        # It must be there when the frame starts (else eager raises NameError here).
        if tx.f_globals is tx.ctx.f_globals:
            tx.guards.add("EQUALS_MATCH", None, f"{name!r} in G", f"{name!r} in globals")
        else:
            module = tx.f_globals.get("__name__")
            tx.guards.add("EQUALS_MATCH", None, f"{name!r} in {{g}}", f"{name!r} in globals of {module}",
                          g=tx.f_globals)
    tx.delete_global(name)


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


@handles("DELETE_ATTR")
def _delete_attr(tx, ins):
    """``del obj.attr`` on a plain object: replayed after the graph like ``STORE_ATTR``."""
    from ..values.classes import MadeClassValue
    from ..values.instances import NewObjectValue
    from ..values.objects import ObjectValue, class_lookup, instance_dict, lookup_hook, readable

    obj, name = tx.pop(), ins.argval
    if isinstance(obj, (NewObjectValue, MadeClassValue)):
        obj.delete_attribute(tx, name)
        return
    if not isinstance(obj, ObjectValue) or obj.source is None:
        raise GraphBreak(f"`del` of attribute `.{name}` of {obj.describe()} is not supported")
    cls = type(obj.obj)
    if lookup_hook(cls, "__delattr__") is not None:
        raise GraphBreak(f"`del` of `.{name}` on {obj.describe()}, whose class has its own __delattr__")
    missing = class_lookup(object, "__set__")
    cls_attr = class_lookup(cls, name)
    if cls_attr is not missing:
        # A property's deleter or a slot decides what a later read gives; a plain class attribute
        # would show through, and the trace reads attributes through the instance.
        raise GraphBreak(f"`del` of `.{name}` on {obj.describe()}, whose class also has an attribute {name!r} "
                         f"(a {type(cls_attr).__name__})")
    override = tx.attribute_override(obj.obj, name)
    if override is DELETED or override is None and name not in (instance_dict(obj.obj) or {}):
        raise GraphBreak(f"`del` of `.{name}`: {obj.describe()} has no instance attribute {name!r} "
                         "(AttributeError at run time)")
    if override is None:
        # Present in the instance dict when the frame starts (read past the class's hooks).
        tx.guards.add("EQUALS_MATCH", obj.source, "{k} in {m}({s}, '__dict__')",
                      f"{readable(obj.source)} has an attribute {name!r}", k=name, m=object.__getattribute__)
    tx.record_delattr(obj, name)


@handles("IMPORT_NAME")
def _import_name(tx, ins):
    fromlist = tx.pop().as_constant()
    level = tx.pop().as_constant()
    name = ins.argval
    if level != 0:
        raise GraphBreak(f"relative `import` of {name!r} inside the captured code")
    if name not in sys.modules:
        # Eager imports it here, once: importing it now (the first call) does the same.
        try:
            importlib.import_module(name)
        except Exception as e:
            raise GraphBreak(f"`import {name}` raises {type(e).__name__}: {e}") from None
    module = sys.modules[name] if fromlist else sys.modules[name.partition(".")[0]]
    tx.push(wrap(tx, module, None))


@handles("IMPORT_FROM")
def _import_from(tx, ins):
    tx.push(tx.stack[-1].getattr(tx, ins.argval))
