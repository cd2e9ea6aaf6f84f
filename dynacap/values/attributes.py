"""``has_attribute``: capture-time answer to ``hasattr(value, name)``, or None if unknown.

For plain objects the answer is the traced attribute read itself (the class's
own ``__getattribute__``/``__getattr__`` and properties run once, as eager
runs them); the engine never calls ``hasattr`` on an object whose class has
lookup hooks.
"""
from __future__ import annotations

from ..errors import GraphBreak


def has_attribute(tx, value, name: str) -> bool | None:
    from .objects import AttributeMissing, ObjectValue
    from .tensor import TensorValue

    if isinstance(value, TensorValue):
        import torch

        from .base import DELETED

        if hasattr(torch.Tensor, name) or name in ("shape",):
            return True
        stored = tx.attribute_override(value, name)
        if stored is not None:
            return stored is not DELETED  # a Python attribute this trace assigned (or deleted)
        # Absent unless the tensor has one of its own (set before the call: then the answer is not known here).
        return False if isinstance(value.missing_attribute(tx, name), AttributeMissing) else None
    from .exceptions import ExceptionValue

    if isinstance(value, (ObjectValue, ExceptionValue)):  # an exception made in the trace: its attributes known
        try:
            value.getattr(tx, name)
        except AttributeMissing as e:
            if e.frames:  # raised inside an inlined getter: only a break models it
                raise
            return False
        return True
    from .module import ModuleValue

    if isinstance(value, ModuleValue):
        return _module_has(tx, value, name)
    try:
        obj = value.real_object()
    except GraphBreak:
        if value.is_constant():
            return hasattr(value.as_constant(), name)
        return None
    return hasattr(obj, name) if (value.source is not None or value.is_constant()) else None


def _module_has(tx, value, name: str) -> bool:
    """``hasattr(module, name)`` from the module's own dicts and its class (``nn.Module.__getattr__``'s rule),
    guarded by the same test at run time (the module may be another instance, or change later)."""
    m = value.module
    d = m.__dict__
    own = (name in d.get("_parameters", {}) or name in d.get("_buffers", {}) or name in d.get("_modules", {})
           or name in d)
    if value.source is not None:
        n = repr(name)
        tx.guards.add("EQUALS_MATCH", value.source,
                      f"({n} in {{s}}._parameters or {n} in {{s}}._buffers or {n} in {{s}}._modules "
                      f"or {n} in {{s}}.__dict__) is {own}",
                      f"hasattr({value.source.expr()}, {n}) is {own} (its own attributes)")
    return own or hasattr(type(m), name)
