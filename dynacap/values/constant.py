"""``ConstantValue``: a Python value known at capture time (int, str, None, dtype, range, type...).

Operations on constants are evaluated while tracing (and guarded where the
constant came from a source); they never add graph nodes.
"""
from __future__ import annotations

import types

import torch

from ..errors import GraphBreak
from .base import Value

#: Types whose instances are immutable and safe to evaluate on at capture time.
CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented),
                  slice, range)


_SYMBOLIC = (torch.SymInt, torch.SymBool, torch.SymFloat)
#: What ``getattr(attr, "__self__", _NO_OWNER)`` gives for an attribute bound to no object.
_NO_OWNER = object()


def _is_symbolic(obj) -> bool:
    return isinstance(obj, _SYMBOLIC)


def is_literal(obj) -> bool:
    import torch

    # ``type(obj)``, not ``isinstance``: that reads ``obj.__class__`` (a class's own hooks).
    t = type(obj)
    if issubclass(t, CONSTANT_TYPES) or issubclass(t, (torch.dtype, torch.device, torch.layout,
                                                       torch.memory_format)):
        return True
    if t in (tuple, frozenset) or issubclass(t, torch.Size):
        return all(is_literal(x) for x in obj)
    return False


class ConstantValue(Value):
    def __init__(self, value, source=None):
        # A symbolic size is a ``SymNumberValue``: as a constant it would be baked in unguarded.
        assert not _is_symbolic(value), "a symbolic number wrapped as a constant"
        self.value = value
        self.source = source

    def kind(self) -> str:
        return "constant"

    def describe(self) -> str:
        return f"constant {self.value!r}"

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self):
        return self.value

    def real_object(self):
        return self.value

    def truth(self, tx) -> bool:
        return bool(self.value)

    def getattr(self, tx, name):
        import torch

        if name == "apply" and isinstance(self.value, type) and issubclass(self.value, torch.autograd.Function):
            from .torch_ns import AutogradApplyValue

            return AutogradApplyValue(self.value)
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            raise GraphBreak(f"{self.describe()} has no attribute {name!r}") from e
        if isinstance(self.value, type) and type(attr) is not types.FunctionType and \
                type(self.value).__getattribute__ is type.__getattribute__:
            # A class attribute (``Cfg.scale``, ``Cfg.table``) may be rebound or changed between calls:
            # read through a source, so it is guarded like any value from the frame.
            from ..source import AttrSource, ClassSource
            from .wrap import wrap

            return wrap(tx, attr, AttrSource(self.source or ClassSource(self.value), name))
        if isinstance(self.value, type) and type(attr) is types.FunctionType:
            # A class's Python function (``type(self).forward``, a staticmethod): inlinable, comparable by
            # identity, and guarded through the class (``Cls.fn = other`` recompiles).
            from ..source import AttrSource, ClassSource
            from .wrap import wrap

            source = AttrSource(self.source or ClassSource(self.value), name) \
                if type(self.value).__getattribute__ is type.__getattribute__ else None
            return wrap(tx, attr, source)
        if callable(attr) and not is_literal(attr):
            if getattr(attr, "__self__", _NO_OWNER) is self.value:  # (a sentinel: ``None.__class__`` is no method)
                from .methods import ConstantMethodValue

                return ConstantMethodValue(self, name)
            from .wrap import wrap

            return wrap(tx, attr, None)  # another object the constant holds (``List[int].__origin__``)
        return ConstantValue(attr)

    def call(self, tx, args, kwargs):
        if isinstance(self.value, type):
            from .instances import instantiate

            return instantiate(tx, self, args, kwargs)
        return super().call(tx, args, kwargs)

    def iterate(self, tx):
        import enum

        if isinstance(self.value, type) and issubclass(type(self.value), enum.EnumMeta):
            from .enums import EnumMemberValue

            return [EnumMemberValue(m) for m in self.value]  # the members, in definition order
        try:
            return [ConstantValue(v) for v in self.value]
        except TypeError as e:
            raise GraphBreak(f"{self.describe()} is not iterable") from e

    def getitem(self, tx, index):
        import enum

        if isinstance(self.value, type) and issubclass(type(self.value), enum.EnumMeta):
            from .enums import lookup_member

            return lookup_member(self.value, index, by_name=True)  # ``Color["RED"]``
        key = index.as_constant()
        try:
            item = self.value[key]
        except Exception as e:
            from .exceptions import from_real

            raise from_real(e, f"indexing {self.describe()} with {key!r} raised {type(e).__name__}: {e}") from None
        return ConstantValue(item)

    def reconstruct(self, cg) -> None:
        cg.load_const(self.value)
