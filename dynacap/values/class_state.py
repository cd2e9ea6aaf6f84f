"""``ClassValue``: a user class that exists outside the trace (``Counter``, ``type(self)``), whose
attributes the captured code may assign (``Counter.created += 1``).

A store on such a class is a side effect on a global object: recorded in program order and replayed
after the graph (``Cls.name = value``), and seen by every later read in the trace, through the class
(``Cls.name``) and through its instances and subclasses (``obj.name`` walks the MRO, the trace's
writes first: ``written_class_attribute``).  Special methods (``Cls.__add__ = f``), classes whose
metaclass has its own ``__setattr__`` (enums) and stores over a data descriptor of the metaclass
are breaks: the engine reads those through the real class dictionaries.  What must not live here:
classes made by the trace (``values.classes``) and any store done at capture time.
"""
from __future__ import annotations

from ..errors import GraphBreak
from ..source import ClassSource
from .base import DELETED, Value
from .constant import ConstantValue
from .objects import _MISSING, _is_data_descriptor, class_lookup, lookup_hook


class ClassValue(ConstantValue):
    """A class object from outside the trace: a constant whose attributes the trace may assign."""

    def getattr(self, tx, name):
        written = written_class_attribute(tx, self.value, name)
        if written is not None:
            if written is DELETED:
                raise GraphBreak(f"attribute `.{name}` of {self.describe()} was deleted while capturing")
            return written
        return super().getattr(tx, name)

    def setattr(self, tx, name, value):
        cls = self.value
        if name.startswith("__") and name.endswith("__"):
            raise GraphBreak(f"assigning the special attribute `.{name}` on class {cls.__qualname__} in captured code")
        if lookup_hook(type(cls), "__setattr__") is not None:
            raise GraphBreak(f"assigning `.{name}` on class {cls.__qualname__}, whose metaclass has its own "
                             "__setattr__")
        meta_attr = class_lookup(type(cls), name)
        if meta_attr is not _MISSING and _is_data_descriptor(meta_attr):
            raise GraphBreak(f"assigning `.{name}` on class {cls.__qualname__}: a {type(meta_attr).__name__} of "
                             "its metaclass")
        target = self if self.source is not None else ClassValue(cls, ClassSource(cls))
        tx.record_setattr(target, name, value)


def written_class_attribute(tx, cls: type, name: str) -> Value | None:
    """What the trace assigned to ``name`` on the first class of ``cls``'s MRO that has it (assigned or
    real), ``DELETED`` if the trace deleted it there; None when the real class attribute stands."""
    for klass in type.__dict__["__mro__"].__get__(cls):
        written = tx.attribute_override(klass, name)
        if written is not None:
            return written
        if name in type.__dict__["__dict__"].__get__(klass):
            return None
    return None
