"""Data descriptors on stores and deletions: CPython's ``PyObject_GenericSetAttr`` over a class attribute.

``obj.name = v`` where ``type(obj)`` has a data descriptor ``name`` (one whose type has ``__set__``
or ``__delete__``) is ``descr.__set__(obj, v)``, and ``del obj.name`` is ``descr.__delete__(obj)``:
a property's ``fset``/``fdel`` or a descriptor class's ``__set__``/``__delete__`` written in Python,
inlined as eager calls them (the descriptor guarded as the class's attribute).  A ``__slots__``
member of an object from the frame is stored and deleted as a plain attribute is (recorded, replayed
after the graph through the same slot).  CPython's other descriptors (``__dict__``), a property without
a setter and a descriptor class without the method are breaks.  Reads go through ``objects.generic_getattr``.  Nothing here stores an attribute
itself: what the inlined code stores goes through the object's own store.
"""
from __future__ import annotations

import types

from ..errors import GraphBreak
from .base import Value
from .objects import _MISSING, AttributeMissing, class_lookup, escaped, guard_class_attribute


def set_through_descriptor(tx, target: Value, name: str, attr, value: Value) -> None:
    """``type(obj).__dict__[name].__set__(obj, value)``: ``attr`` is a data descriptor of the class."""
    if type(attr) is property:
        if attr.fset is None:
            raise GraphBreak(f"property {name!r} of {target.describe()} has no setter (AttributeError at run time)")
        _inline(tx, target, name, attr, attr.fset, [target, value])
        return
    if _is_slot_of(attr, target):
        # The object's own slot: stored as a plain attribute would be, replayed with STORE_ATTR (the same slot).
        guard_class_attribute(tx, target, target.obj, name, attr)
        tx.record_setattr(target, name, value, slot=True)
        return
    setter = class_lookup(type(attr), "__set__")
    if type(setter) is not types.FunctionType:
        what = "no __set__ (AttributeError at run time)" if setter is _MISSING else "a built-in __set__"
        raise GraphBreak(f"assigning `.{name}` on {target.describe()}: its class's {type(attr).__name__} has {what}")
    _inline(tx, target, name, attr, setter, [_descriptor(tx, attr), target, value])


def delete_through_descriptor(tx, target: Value, name: str, attr) -> None:
    """``type(obj).__dict__[name].__delete__(obj)``: ``attr`` is a data descriptor of the class."""
    if type(attr) is property:
        if attr.fdel is None:
            raise GraphBreak(f"property {name!r} of {target.describe()} has no deleter (AttributeError at run time)")
        _inline(tx, target, name, attr, attr.fdel, [target])
        return
    if _is_slot_of(attr, target):
        guard_class_attribute(tx, target, target.obj, name, attr)
        tx.record_delattr(target, name)
        return
    deleter = class_lookup(type(attr), "__delete__")
    if type(deleter) is not types.FunctionType:
        what = "no __delete__ (AttributeError at run time)" if deleter is _MISSING else "a built-in __delete__"
        raise GraphBreak(f"`del` of `.{name}` on {target.describe()}: its class's {type(attr).__name__} has {what}")
    _inline(tx, target, name, attr, deleter, [_descriptor(tx, attr), target])


def _is_slot_of(attr, target: Value) -> bool:
    """Whether ``attr`` is a ``__slots__`` member of ``target``'s class (or a base), one that applies to it."""
    return type(attr) is types.MemberDescriptorType and isinstance(target.obj, attr.__objclass__)


def get_through_descriptor(tx, target: Value, name: str, attr, getter) -> Value:
    """``attr.__get__(obj, type(obj))`` for a descriptor class whose ``__get__`` is Python code."""
    from .wrap import wrap

    return _inline(tx, target, name, attr, getter, [_descriptor(tx, attr), target, wrap(tx, type(target.obj), None)])


def _descriptor(tx, attr) -> Value:
    """The descriptor object (the class's attribute, guarded by identity through the class)."""
    from .wrap import wrap

    return wrap(tx, attr, None)


def _inline(tx, target: Value, name: str, attr, function, args: list[Value]) -> Value:
    from .functions import UserFunctionValue

    guard_class_attribute(tx, target, target.obj, name, attr)
    calling, tx.calling = tx.calling, False  # the method's result is not a CALL's
    try:
        return UserFunctionValue(function).call(tx, args, {})
    except AttributeMissing as e:
        raise escaped(e) from None
    finally:
        tx.calling = calling
