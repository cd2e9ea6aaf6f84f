"""A frame's namespaces as values: ``globals()`` (the module dict) and ``locals()``/``vars()`` (a snapshot).

``globals()`` is the frame's module dict itself: reading ``g["k"]`` is the same read as the global
``k`` (the trace's own stores included), ``g["k"] = v`` and ``del g["k"]`` are the same replayed
stores as ``STORE_GLOBAL``/``DELETE_GLOBAL``, so a later ``LOAD_GLOBAL`` sees them, as eager does.
A module dict reached from the frame (the argument of a resume function after a break at
``globals()``) is this value too.  ``locals()`` is CPython 3.11's ``f_locals``: one dict per frame,
brought up to date with the frame's bound variables at each call.  What must not live here: reading
or writing the real globals during the trace (stores are side effects, replayed after the graph).
"""
from __future__ import annotations

import weakref

from ..errors import GraphBreak
from .base import DELETED, Value
from .constant import ConstantValue
from .containers import DictValue


class GlobalsValue(Value):
    """A module's globals dict (``globals()``, or the dict read from the frame): a view of the globals."""

    def __init__(self, namespace: dict, source=None):
        self.namespace = namespace
        self.source = source

    def python_type(self):
        return dict

    def describe(self):
        return f"the globals of module {self.namespace.get('__name__', '?')}"

    def real_object(self):
        return self.namespace

    def truth(self, tx):
        return True  # a module dict always holds __name__

    def _frame(self, tx, what: str):
        """The tracer whose globals these are (stores go through it), or a break."""
        t = tx
        while t is not None and t.f_globals is not self.namespace:
            t = t.parent
        if t is None:
            raise GraphBreak(f"{what} of {self.describe()} from code of another module")
        return t

    def _name(self, key: Value, what: str) -> str:
        if not (key.is_constant() and type(key.as_constant()) is str):
            raise GraphBreak(f"{what} of {self.describe()} with the key {key.describe()}")
        return key.as_constant()

    def lookup(self, tx, key: Value) -> Value | None:
        """``g[key]`` as the trace sees it (its own stores first), or None when the key is missing."""
        name = self._name(key, "reading an item")
        frame = self._frame(tx, "reading an item")
        override = tx.ctx.global_overrides.get((id(self.namespace), name))
        if override is DELETED:
            return None
        if override is not None:
            return override
        if name in self.namespace:
            from .wrap import wrap

            return wrap(frame, self.namespace[name], frame.global_source(name))
        if self.namespace is tx.ctx.f_globals:
            tx.guards.add("NOT_PRESENT", None, f"{name!r} not in G")
        else:
            tx.guards.add("NOT_PRESENT", None, f"{name!r} not in {{g}}",
                          f"{name!r} not in globals of {self.namespace.get('__name__')}", g=self.namespace)
        return None

    def getitem(self, tx, index):
        value = self.lookup(tx, index)
        if value is None:
            from .exceptions import python_error

            key = index.as_constant()
            raise python_error(KeyError, key, reason=f"{key!r} is not a global (KeyError at run time)")
        return value

    def contains(self, tx, key: Value) -> bool:
        return self.lookup(tx, key) is not None

    def setitem(self, tx, index, value):
        name = self._name(index, "assigning an item")
        self._frame(tx, "assigning an item").store_global(name, value)

    def delitem(self, tx, index):
        name = self._name(index, "deleting an item")
        self.getitem(tx, index)  # KeyError when missing, as eager raises
        self._frame(tx, "deleting an item").delete_global(name)

    def getattr(self, tx, name):
        if name == "get":
            return _GlobalsGet(self)
        return super().getattr(tx, name)


class _GlobalsGet(Value):
    """``globals().get(k, default=None)``."""

    def __init__(self, namespace: GlobalsValue):
        self.namespace = namespace

    def describe(self):
        return f"method .get of {self.namespace.describe()}"

    def call(self, tx, args, kwargs):
        if kwargs or len(args) not in (1, 2):
            raise GraphBreak(f"{self.describe()} takes one or two positional arguments")
        value = self.namespace.lookup(tx, args[0])
        if value is not None:
            return value
        return args[1] if len(args) > 1 else ConstantValue(None)


def is_module_globals(tx, obj) -> bool:
    """Whether ``obj`` is the globals dict of a frame being traced (the root's or an inlined callee's)."""
    t = tx
    while t is not None:
        if obj is t.f_globals:
            return True
        t = t.parent
    return obj is tx.ctx.f_globals


def frame_globals(tx) -> GlobalsValue:
    """``globals()`` in the frame ``tx`` traces."""
    return GlobalsValue(tx.f_globals)


#: Per traced frame: its ``f_locals`` dict (``locals()`` returns the same dict at each call).
_FRAME_LOCALS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def frame_locals(tx) -> DictValue:
    """``locals()``/``vars()`` in the frame ``tx`` traces, as CPython 3.11's ``PyFrame_FastToLocals`` makes it:
    one dict per frame whose keys follow the frame's variables (arguments and locals, then cells, then
    free variables); each call stores the bound ones and drops the unbound ones."""
    code = tx.code
    names = list(code.co_varnames) + [c for c in code.co_cellvars if c not in code.co_varnames] + \
        list(code.co_freevars)
    snapshot = _FRAME_LOCALS.get(tx)
    if snapshot is None:
        snapshot = _FRAME_LOCALS[tx] = DictValue({})
    for name in names:
        value = _bound(tx, name)
        if value is None:
            snapshot.items.pop(name, None)
        else:
            snapshot.items[name] = value
    snapshot.mutate(tx)
    return snapshot


def _bound(tx, name: str) -> Value | None:
    """The value of the frame's variable ``name``, or None while it is unbound."""
    cell = tx.cells.get(name)
    if cell is not None:
        return cell.get(tx)
    if name in tx.locals:
        return tx.locals[name]
    if tx.is_root and name in tx.frame_values and name not in tx.deleted:
        return tx.read_local(name)
    return None
