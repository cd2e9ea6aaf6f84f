"""How an inlined call's frame starts: its arguments bound to the callee's signature, its defaults and its
closure cells wrapped as values (``CellBox``).

What eager's call does before the callee's first instruction, done for a child ``Tracer``; a call that
would raise ``TypeError`` is a break.  Nothing here interprets bytecode.
"""
from __future__ import annotations

import inspect
import types
import weakref

import torch

from ..errors import GraphBreak
from ..source import AttrSource, CellContentsSource, ClassSource, ItemSource
from ..values.base import Value
from ..values.constant import ConstantValue, is_literal
from ..values.containers import DictValue, TupleValue
from ..values.wrap import wrap



class CellBox:
    """A closure cell while tracing: shared by the frame that owns it and inlined closures.

    A cell that exists at run time (a closure of the traced frame or of a
    function reached from it) has a ``source``; its contents are wrapped
    (and guarded) on first read only.
    """

    _UNREAD = object()

    def __init__(self, value: Value | None = None, source=None, raw=_UNREAD):
        self._value = value
        self.source = source
        self._raw = raw

    def get(self, tx) -> Value | None:
        if self._raw is not CellBox._UNREAD:
            raw, self._raw = self._raw, CellBox._UNREAD
            self._value = wrap(tx, raw, self.source) if self.source is not None else wrap_unsourced(tx, raw)
        return self._value

    def set(self, value: Value) -> None:
        self._raw = CellBox._UNREAD
        self._value = value

    def peek(self) -> Value | None:
        """The contents as a value if the trace made or read them (unread contents are not wrapped here)."""
        return self._value if self._raw is CellBox._UNREAD else None


def bind_arguments(tx, fn_value, args: list[Value], kwargs: dict[str, Value]) -> dict[str, Value]:
    """The callee's locals at entry: ``args``/``kwargs`` bound as its signature binds them, defaults wrapped."""
    fn = fn_value.fn
    # The code that runs is fn's own: never the signature functools.wraps advertises.
    signature, plans = _signature_and_plans(fn)
    key = (len(args), tuple(kwargs))
    plan = plans.get(key) if plans is not None else None
    if plan is None:
        try:
            plan = _plan_of(signature, key)
        except TypeError as e:
            raise GraphBreak(f"calling {fn.__qualname__}: {e} (TypeError at run time)") from None
        if plans is not None:
            plans[key] = plan
    local_values = {}
    for name, how, where, param in plan:
        if how is _VARARGS:
            local_values[name] = TupleValue(list(args[where:]))
            continue
        if how is _VARKW:
            local_values[name] = DictValue({n: kwargs[n] for n in where})
            continue
        value = args[where] if how is _ARG else kwargs[where] if how is _KW else where
        if not isinstance(value, Value):
            value = _wrap_default(tx, fn_value, name, param, value)
        local_values[name] = value
    return local_values


class _Argument:
    """Stands for one argument of a call while its binding plan is made: ``index`` positional, ``name`` keyword."""

    __slots__ = ("index", "name")

    def __init__(self, index=None, name=None):
        self.index, self.name = index, name


#: Where a parameter's value comes from in a binding plan (``_plan_of``).
_ARG, _KW, _DEFAULT, _VARARGS, _VARKW = "arg", "kw", "default", "varargs", "varkw"


def _plan_of(signature: inspect.Signature, key: tuple) -> tuple:
    """How ``signature.bind`` (then ``apply_defaults``) binds a call of ``key`` = (positional count, keyword
    names in order): it reads only that shape, never the values, and raises the same ``TypeError``.  Per
    parameter, in the bound order: ``(name, how, where, parameter)``, ``where`` being the argument's index
    (``_ARG``), its keyword (``_KW``), the default value (``_DEFAULT``), the first index of ``*args``
    (``_VARARGS``) or the keywords of ``**kwargs`` (``_VARKW``)."""
    count, names = key
    bound = signature.bind(*[_Argument(index=i) for i in range(count)], **{n: _Argument(name=n) for n in names})
    bound.apply_defaults()
    plan = []
    for name, value in bound.arguments.items():
        param = signature.parameters[name]
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            plan.append((name, _VARARGS, value[0].index if value else count, param))
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            plan.append((name, _VARKW, tuple(value), param))
        elif type(value) is _Argument:
            plan.append((name, _ARG, value.index, param) if value.name is None else (name, _KW, value.name, param))
        else:
            plan.append((name, _DEFAULT, value, param))
    return tuple(plan)


def closure_cells(tx, fn_value) -> dict[str, CellBox]:
    """The callee's free variables: the trace's own cell boxes for a function it made, else the real cells,
    read (and guarded) through the function on first use."""
    fn = fn_value.fn
    names = fn.__code__.co_freevars
    boxes = fn_value.closure_cells
    if boxes is None:
        boxes = tx.ctx.made_closures.get(id(fn), (None, None))[1]
    if boxes is not None:
        return dict(zip(names, boxes))
    cells = {}
    for i, (name, cell) in enumerate(zip(names, fn.__closure__)):
        try:
            contents = cell.cell_contents
        except ValueError:
            cells[name] = CellBox(None)
            continue
        # A function found without a path (a method through its object's class, guarded there) is
        # reached as itself: its cells' contents are then guarded, and changes to them replayed.
        base = fn_value.source if fn_value.source is not None else ClassSource(fn)
        cells[name] = CellBox(source=CellContentsSource(base, i, name), raw=contents)
    return cells


def _wrap_default(tx, fn_value, name: str, param: inspect.Parameter, value) -> Value:
    """A default argument: guarded through the function when it can be reached, else as a constant."""
    source = _default_source(fn_value, name, param)
    return wrap(tx, value, source) if source is not None else wrap_unsourced(tx, value)



def _default_source(fn_value, name: str, param: inspect.Parameter):
    """Where a default argument lives (``fn.__defaults__[i]`` / ``fn.__kwdefaults__[name]``), if reachable."""
    if fn_value.source is None:
        return None
    if param.kind is inspect.Parameter.KEYWORD_ONLY:
        return ItemSource(AttrSource(fn_value.source, "__kwdefaults__"), name)
    positional = [p for p in signature_of(fn_value.fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    with_defaults = [p.name for p in positional if p.default is not p.empty]
    return ItemSource(AttrSource(fn_value.source, "__defaults__"), with_defaults.index(name))



#: id(function) -> (weak reference to it, its code, defaults, kwdefaults, its Signature, the binding plans of
#: its call shapes): a function's signature is a function of those three (each compared by identity), unless
#: it carries a ``__signature__`` of its own (never memoised).
_SIGNATURES: dict[int, tuple] = {}


def signature_of(fn: types.FunctionType) -> inspect.Signature:
    """``inspect.signature(fn, follow_wrapped=False)``, computed once per function while it is unchanged."""
    return _signature_and_plans(fn)[0]


def _signature_and_plans(fn: types.FunctionType) -> tuple:
    """``signature_of(fn)`` and its binding plans by call shape (``_plan_of``; None: not memoised)."""
    if "__signature__" in fn.__dict__:
        return inspect.signature(fn, follow_wrapped=False), None
    key = id(fn)
    known = _SIGNATURES.get(key)
    if known is not None and known[0]() is fn and known[1] is fn.__code__ and known[2] is fn.__defaults__ and \
            known[3] is fn.__kwdefaults__:
        return known[4], known[5]
    signature = inspect.signature(fn, follow_wrapped=False)
    plans: dict = {}
    _SIGNATURES[key] = (weakref.ref(fn, lambda _, key=key: _SIGNATURES.pop(key, None)), fn.__code__,
                        fn.__defaults__, fn.__kwdefaults__, signature, plans)
    return signature, plans



def wrap_unsourced(tx, value) -> Value:
    """A value with no source: a default argument, or a closure of an unreachable function."""
    if is_literal(value):
        return ConstantValue(value)
    if isinstance(value, torch.Tensor):
        raise GraphBreak("a tensor held in a default argument or closure that dynacap cannot reach")
    return wrap(tx, value, None)
