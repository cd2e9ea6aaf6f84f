"""``TorchValue``: the ``torch`` module tree, its functions, classes and ops.

Calling a torch function adds a ``call_function`` node (through
``tx.graph.call``), whose fake result decides the value kind; a result that
is a plain Python value (``torch.is_tensor(x)``) becomes a constant.  Grad
mode queries are answered at capture time and covered by the global-state
guard.
"""
from __future__ import annotations

import types

import torch

from .. import trace_rules
from ..errors import GraphBreak
from ..source import AttrSource
from ..trace_rules import Rule
from .base import Value, constant_args
from .constant import ConstantValue
from . import packed_sequences
from .containers import SizeValue
from .library import call_by_rule

def is_torch_object(obj) -> bool:
    """Whether ``obj`` belongs to torch's own namespace (and is not an ``nn.Module`` or a tensor)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__ == "torch" or obj.__name__.startswith("torch.")
    if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    module = getattr(obj, "__module__", None) or ""
    if not (module == "torch" or module.startswith("torch.")):
        return False
    if _instance_of_traced_class(obj):
        return False
    return callable(obj) and not isinstance(obj, torch.nn.Module)


def _instance_of_traced_class(obj) -> bool:
    """An object of a class written in torch's traced Python with a Python ``__call__`` (the hook object
    ``nn.utils.spectral_norm`` registers): an object like a user's, its ``__call__`` traced."""
    cls = type(obj)
    if isinstance(obj, type) or not isinstance(getattr(cls, "__call__", None), types.FunctionType):
        return False
    rule = trace_rules.lookup(f"{cls.__module__}.{cls.__qualname__}")
    return rule is not None and rule.rule is Rule.INLINE


class TorchValue(Value):
    def __init__(self, obj, source=None):
        self.obj = obj
        self.source = source

    def describe(self):
        name = getattr(self.obj, "__name__", None) or repr(self.obj)
        module = getattr(self.obj, "__module__", None)
        if isinstance(self.obj, types.ModuleType):
            return f"module {name}"
        return f"`{module}.{name}`" if module else f"`{name}`"

    def real_object(self):
        return self.obj

    def python_type(self):
        return type(self.obj)

    def is_constant(self) -> bool:
        return isinstance(self.obj, type)

    def as_constant(self):
        if isinstance(self.obj, type):
            return self.obj
        return super().as_constant()

    def getattr(self, tx, name):
        from .wrap import wrap

        try:
            attr = getattr(self.obj, name)
        except AttributeError as e:
            raise GraphBreak(f"{self.describe()} has no attribute {name!r}") from e
        return wrap(tx, attr, AttrSource(self.source, name) if self.source is not None else None)

    def call(self, tx, args, kwargs):
        fn = self.obj
        if isinstance(fn, types.ModuleType):
            raise GraphBreak(f"{self.describe()} is not callable")
        rule = trace_rules.rule_for_object(fn)
        if rule is not None and not (rule.rule is Rule.GRAPH_OP and isinstance(fn, types.FunctionType)):
            return call_by_rule(tx, self, rule, args, kwargs)
        if fn in packed_sequences.KERNELS:
            packed = packed_sequences.call_kernel(tx, fn, args, kwargs)
            if packed is not None:
                return packed
        if fn is torch.Size:
            items = args[0].iterate(tx) if args else []
            if not all(i.is_constant() for i in items):
                raise GraphBreak("torch.Size of non-constant values")
            return SizeValue(items)
        if isinstance(fn, type) and issubclass(fn, torch.autocast):
            from .autocast import make_autocast

            return make_autocast(args, kwargs)
        if fn is torch.set_grad_enabled and len(args) == 1 and not kwargs and args[0].is_constant():
            from .grad_mode import GradSetValue

            return GradSetValue(tx, bool(args[0].as_constant()))
        if fn in (torch.no_grad, torch.enable_grad) and not args and not kwargs:
            from .grad_mode import GradModeValue

            return GradModeValue(fn)
        if isinstance(fn, type):
            from .legacy_tensors import construct

            legacy = construct(tx, fn, args, kwargs)
            if legacy is not None:
                return legacy
            if issubclass(fn, torch.nn.Module):
                from .module import create_layer

                return create_layer(fn, args, kwargs)
            if fn in (torch.device, torch.dtype) or issubclass(fn, torch.finfo) or issubclass(fn, torch.iinfo):
                const = constant_args(args, kwargs)
                if const is not None:
                    return ConstantValue(fn(*const[0], **const[1]))
            if not issubclass(fn, torch.Tensor):
                class_rule = trace_rules.lookup(f"{fn.__module__}.{fn.__qualname__}")
                if class_rule is not None and class_rule.rule is Rule.INLINE:
                    from .instances import instantiate

                    return instantiate(tx, ConstantValue(fn, self.source), args, kwargs)
                raise GraphBreak(f"constructing {self.describe()} is not supported")
        name = getattr(fn, "__name__", repr(fn))
        return tx.graph.call("call_function", fn, args, kwargs, f"torch.{name}")


class AutogradApplyValue(Value):
    """``MyFunction.apply`` of a custom ``torch.autograd.Function``: one graph node.

    The node calls ``apply`` itself, so the function's own ``backward`` is
    used; its ``forward`` runs on fake tensors at capture time.
    """

    def __init__(self, function_class: type):
        self.function_class = function_class

    def describe(self):
        return f"`{self.function_class.__qualname__}.apply`"

    def real_object(self):
        # Also what runs when the call is a graph break: apply, with the forward uncaptured.
        return _apply_target(self.function_class)

    def call(self, tx, args, kwargs):
        return tx.graph.call("call_function", _apply_target(self.function_class), args, kwargs,
                             f"{self.function_class.__qualname__}.apply")


_APPLY_TARGETS: dict = {}


def _apply_target(function_class: type):
    """A plain function calling ``function_class.apply``, usable as an FX target.

    FX names a target by its module and qualified name; ``apply`` itself would be
    written as ``torch.autograd.function.apply``, which does not exist.  The
    function's own ``forward`` runs as written, never captured.
    """
    target = _APPLY_TARGETS.get(function_class)
    if target is None:
        from .._C import call_with_callback

        apply = function_class.apply

        def target(*args, **kwargs):
            return call_with_callback(None, apply, *args, **kwargs)

        target.__name__ = target.__qualname__ = f"{function_class.__name__}_apply"
        target.__module__ = function_class.__module__
        _APPLY_TARGETS[function_class] = target
    return target
