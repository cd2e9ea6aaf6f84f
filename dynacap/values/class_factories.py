"""Class factories in captured code: ``collections.namedtuple`` and ``@dataclass`` on a class made here.

``models.class_factories`` binds the arguments as the real signatures do and calls a marker class
that ``class_factory`` answers.  A named-tuple class is the real factory's class on the constant
arguments (never changed, never handed out: a template of the trace), made again by the factory at
run time when it escapes.  ``@dataclass`` completes a class made in the trace: the real decorator
runs on a copy of its template (standard-library code over constants and trace-time functions) and
what it adds joins the namespace.  A class from the frame is a break: the decorator would change a
class that outlives the call.
"""
from __future__ import annotations

from ..errors import GraphBreak
from .base import Value
from .classes import Completion, MadeClassValue, _fill_class_cells, _real_stand_in, _register, _Stand_in, own_dict
from .constant import ConstantValue
from .made_descriptors import make_descriptor


def class_factory(tx, cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """``cls(*args)`` when ``cls`` makes a value of this module (None: any other class)."""
    from ..models.class_factories import DataclassOf, NamedTupleOf

    if cls is NamedTupleOf:
        return _namedtuple_of(tx, args)
    if cls is DataclassOf:
        return _dataclass_of(tx, args)
    return make_descriptor(cls, args, kwargs)


def _constant(tx, value: Value, what: str):
    """A constant argument (a list or tuple of constants as a tuple), else a break."""
    from .containers import SequenceValue

    if isinstance(value, SequenceValue):
        return tuple(_constant(tx, v, what) for v in value.iterate(tx))
    if not value.is_constant() or isinstance(value, MadeClassValue):
        raise GraphBreak(f"{what} with {value.describe()}, which is not a constant")
    return value.as_constant()


def _caller_globals(tx) -> dict:
    """The globals of the user frame that called the model (``sys._getframe(1)`` of the real factory)."""
    import os

    models_dir = os.path.dirname(os.path.abspath(__file__)).rsplit(os.sep, 1)[0] + os.sep + "models" + os.sep
    caller = tx
    while caller.parent is not None and os.path.abspath(caller.code.co_filename).startswith(models_dir):
        caller = caller.parent
    return caller.f_globals


class NamedTupleClassValue(ConstantValue):
    """A class ``collections.namedtuple`` made in the trace: the real factory's class on the constant
    arguments (never changed, never handed out), made again by the factory at run time when it escapes."""

    def __init__(self, cls: type, arguments: tuple):
        super().__init__(cls)
        self.arguments = arguments

    def describe(self):
        return f"named-tuple class {self.value.__qualname__} created in captured code"

    def real_object(self):
        raise GraphBreak(f"{self.describe()} is a new class on each call")

    def reconstruct(self, cg) -> None:
        cg.build_once(self, lambda cg: cg.call(_rebuild_namedtuple, *self.arguments))


def _rebuild_namedtuple(typename, field_names, rename, defaults, module):
    import collections

    return collections.namedtuple(typename, field_names, rename=rename, defaults=defaults, module=module)


def _namedtuple_of(tx, args: list[Value]) -> Value:
    typename, field_names, rename, defaults, module = (_constant(tx, v, "collections.namedtuple()") for v in args)
    if module is None:
        module = _caller_globals(tx).get("__name__", "__main__")
    arguments = (typename, field_names, rename, defaults, module)
    try:
        cls = _rebuild_namedtuple(*arguments)
    except (TypeError, ValueError) as e:
        raise GraphBreak(f"collections.namedtuple(): {e} ({type(e).__name__} at run time)") from None
    value = NamedTupleClassValue(cls, arguments)
    _register(tx, value)
    return value


_DATACLASS_FLAGS = ("init", "repr", "eq", "order", "unsafe_hash", "frozen", "match_args", "kw_only", "slots",
                    "weakref_slot")


def _dataclass_of(tx, args: list[Value]) -> Value:
    """``@dataclass(...)`` on a class made in the trace: the real decorator completes a copy of its template
    (pure standard-library code over constants and trace-time functions), whose new attributes (the
    generated ``__init__``, ``__eq__``, ``__dataclass_fields__``...) join the namespace; the copy becomes
    the template.  The class the decorator returns is the one it was given, as in eager."""
    import dataclasses

    cls_value, flag_values = args[0], args[1:]
    if not isinstance(cls_value, MadeClassValue):
        raise GraphBreak(f"@dataclass on {cls_value.describe()}: it changes a class that outlives the call; "
                         "only classes made in captured code are completed there")
    flags = dict(zip(_DATACLASS_FLAGS, (_constant(tx, v, "@dataclass") for v in flag_values)))
    if flags["slots"]:
        raise GraphBreak("@dataclass(slots=True) makes another class: not captured")
    if cls_value.observed:
        raise GraphBreak(f"@dataclass on {cls_value.describe()} after it was used (an instance or a subclass)")
    real_ns = {}
    for name, value in cls_value.namespace.items():
        if name == "__annotations__":
            real_ns[name] = _real_annotations(tx, value)
            continue
        real = _real_stand_in(value, name)
        if type(real) is _Stand_in and name in real_ns.get("__annotations__", {}):
            raise GraphBreak(f"@dataclass on {cls_value.describe()}: the default of field {name!r} is "
                             f"{value.describe()}, not a constant")
        real_ns[name] = real
    template = cls_value.value
    scratch = type(template.__name__, tuple(type.__dict__["__bases__"].__get__(template)), real_ns)
    try:
        completed = dataclasses.dataclass(scratch, **flags)
    except (TypeError, ValueError) as e:
        raise GraphBreak(f"@dataclass on {cls_value.describe()}: {e} ({type(e).__name__} at run time)") from None
    if completed is not scratch:
        raise GraphBreak("@dataclass made another class: not captured")
    from .wrap import wrap

    added = {k: v for k, v in own_dict(completed).items() if k not in real_ns or real_ns[k] is not v}
    if any(k not in own_dict(completed) for k in real_ns if k != "__qualname__"):  # type() takes __qualname__
        raise GraphBreak(f"@dataclass on {cls_value.describe()} removed a class attribute: not captured")
    tx.ctx.mutations += 1  # the class changes in place (as eager's does)
    body = dict(cls_value.namespace)
    for name, value in added.items():
        if name in ("__dict__", "__weakref__") or (name == "__doc__" and "__doc__" in own_dict(template)
                                                 and own_dict(template)["__doc__"] == value):
            continue
        cls_value.namespace[name] = wrap(tx, value, None)
    cls_value.value = completed
    cls_value.made = {**cls_value.made, id(completed): cls_value}
    _register(tx, cls_value)
    _fill_class_cells(completed, cls_value.namespace)
    cls_value.completion = Completion(complete_dataclass, flags, body, dict(cls_value.namespace))
    return cls_value


def complete_dataclass(cls: type, options: dict) -> type:
    """What the rewritten code calls on a dataclass made again at run time: the decorator, as in eager."""
    import dataclasses

    return dataclasses.dataclass(cls, **options)


def _real_annotations(tx, value: Value) -> dict:
    """The class's ``__annotations__`` as real objects (types, strings) for the decorator to read."""
    from .containers import DictValue

    if not isinstance(value, DictValue):
        raise GraphBreak(f"@dataclass on a class whose __annotations__ is {value.describe()}")
    real = {}
    for name, annotation in value.items.items():
        try:
            real[name] = annotation.as_constant() if annotation.is_constant() else annotation.real_object()
        except GraphBreak:
            raise GraphBreak(f"@dataclass: the annotation of {name!r} is {annotation.describe()}") from None
    return real
