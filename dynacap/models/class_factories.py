"""Models of the standard library's class factories: ``collections.namedtuple`` and ``@dataclasses.dataclass``.

Each makes (or completes) a class, which eager does anew on every call: in captured code the class
is one of the trace (``values.classes``), made again at run time when it escapes, never one object
shared by the calls.  The models only bind the arguments as the real signatures do; the work is
a call of ``NamedTupleOf`` / ``DataclassOf``, which the trace answers with a class value
(``values.class_factories.class_factory``).  Like every models file, this one imports nothing of the engine.
"""
from __future__ import annotations


class NamedTupleOf:
    """What the trace answers with a named-tuple class of the trace; never made for real."""

    def __new__(cls, *args):
        raise TypeError("NamedTupleOf is called in captured code only")


class DataclassOf:
    """What the trace answers by completing a class of the trace; never made for real."""

    def __new__(cls, *args):
        raise TypeError("DataclassOf is called in captured code only")


def namedtuple(typename, field_names, *, rename=False, defaults=None, module=None):
    """``collections.namedtuple``: a named-tuple class made in the trace (its arguments must be constants)."""
    return NamedTupleOf(typename, field_names, rename, defaults, module)


def dataclass(cls=None, /, *, init=True, repr=True, eq=True, order=False, unsafe_hash=False, frozen=False,
              match_args=True, kw_only=False, slots=False, weakref_slot=False):
    """``dataclasses.dataclass``: completes a class made in the trace (a class from the frame is a break)."""
    def wrap(cls):
        return DataclassOf(cls, init, repr, eq, order, unsafe_hash, frozen, match_args, kw_only, slots, weakref_slot)

    if cls is None:
        return wrap
    return wrap(cls)


#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
MODELS = {
    "collections.namedtuple": (namedtuple, "the real factory on the constant arguments, a new class per call"),
    "dataclasses.dataclass": (dataclass, "the real decorator on a copy of a class made in the trace"),
}
