"""Python builtins (``len``, ``isinstance``, ``range``, ``min``...) over symbolic values.

``BuiltinValue`` is a builtin function or class met in captured code; calling it dispatches by name to a
handler of one family module: ``iteration`` (iter, next, zip, enumerate...), ``ordering`` (min, max,
sorted), ``constructors`` (tuple, dict, int...), ``introspection`` (type, isinstance, getattr, vars...),
``dunders`` (len, abs, hash, repr, format) and ``printing`` (``print`` replayed after the graph, when
``config.reorderable_logging_functions`` asks).  A handler answers None when it has no model for these
arguments; a builtin with only constant arguments is then simply called.  ``print`` (by default),
``input``, ``open`` and other builtins with effects are graph breaks.
"""
from __future__ import annotations

import collections

from ...errors import GraphBreak
from ..base import Value, constant_args
from ..constant import ConstantValue
from . import constructors, dunders, introspection, iteration, ordering, printing

_EFFECTFUL = {"print", "input", "open", "exec", "eval", "compile", "breakpoint", "exit", "quit", "delattr", "globals", "locals", "vars", "id", "iter", "next", "super", "__import__", "help"}

#: builtin name -> handler(tx, args, kwargs), returning a value or None (no model for these arguments).
HANDLERS = {**iteration.HANDLERS, **ordering.HANDLERS, **constructors.HANDLERS, **introspection.HANDLERS,
            **dunders.HANDLERS, **printing.HANDLERS}


class BuiltinValue(Value):
    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return f"builtin `{self.fn.__name__}`"

    def real_object(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantValue(getattr(self.fn, name))
        if isinstance(self.fn, type) and name in ("__mro__", "__bases__", "__base__"):
            return ConstantValue(getattr(self.fn, name))  # a built-in class's MRO never changes
        if self.fn is object and name == "__getattribute__":
            from ..objects import GenericGetattrValue

            return GenericGetattrValue()
        if self.fn is object and name == "__new__":
            from ..instances import ObjectNewValue

            return ObjectNewValue()  # ``object.__new__(cls)``: a new object of the trace
        if self.fn is tuple and name == "__new__":
            from ..subclasses import TupleNewValue

            return TupleNewValue()
        if self.fn is object and name == "__setattr__":
            from ..objects import GenericSetattrValue

            return GenericSetattrValue()
        if name == "fromkeys" and self.fn in (dict, collections.OrderedDict):
            return constructors.FromKeysValue(self.fn)
        return super().getattr(tx, name)

    def is_constant(self) -> bool:
        # A builtin class is an immutable constant (a subscript of ``List[int]``, ``Dict[str, int]``).
        return isinstance(self.fn, type)

    def as_constant(self):
        if isinstance(self.fn, type):
            return self.fn
        return super().as_constant()

    def getitem(self, tx, index):
        """``list[int]``, ``dict[str, Tensor]``: a type annotation (``types.GenericAlias``), a constant."""
        if isinstance(self.fn, type) and index.is_constant():
            return ConstantValue(self.fn[index.as_constant()])
        return super().getitem(tx, index)

    def call(self, tx, args, kwargs):
        name = self.fn.__name__
        handler = HANDLERS.get(name)
        if handler is not None:
            result = handler(tx, args, kwargs)
            if result is not None:
                return result
        if name in _EFFECTFUL:
            hint = " (move it out of the captured code or behind a flag, or replay it after the graph with " \
                   "config.reorderable_logging_functions={print}, to keep one graph)" \
                if name == "print" else ""
            raise GraphBreak(f"`{name}()` has effects outside the graph; it runs eagerly{hint}")
        const = constant_args(args, kwargs)
        if const is not None:
            from ..wrap import wrap_constant_result

            try:
                return wrap_constant_result(self.fn(*const[0], **const[1]), f"{name}()")
            except Exception as e:
                from ..exceptions import from_real

                raise from_real(e, f"`{name}()` raised {type(e).__name__}: {e}") from None
        raise GraphBreak(f"`{name}()` on {', '.join(a.describe() for a in args)} is not supported")
