"""Legacy tensor constructors as the graph operations eager runs for them.

``torch.FloatTensor(...)`` and the other typed classes, ``torch.Tensor(...)``,
``x.new(...)``, ``torch.autograd.Variable(x)`` and ``x.type(...)`` predate
``torch.tensor``/``torch.empty``/``detach``/``to``; eager parses their
arguments in C++ (``legacy_tensor_ctor``) into one of these, which is what
the graph records:

- no argument: ``empty(0)``; ints or a ``torch.Size``: ``empty(sizes)``
  (uninitialized memory, as eager);
- one sequence that is not a ``torch.Size``: ``tensor(data)`` (the values);
- a tensor of the class's own dtype and device: ``alias`` (same storage and
  version counter; a tensor of another dtype is eager's ``TypeError``, so the
  call runs eagerly and raises it);
- ``Variable(x)``: ``x.detach()``; ``requires_grad=True`` makes a new leaf, which runs eagerly
  (``MAKES_LEAF``).

Anything else is a graph break that runs the call eagerly.  This module only
translates calls; ``torch_ns`` and ``tensor`` decide when to ask it.
"""
from __future__ import annotations

import torch

from ..errors import GraphBreak
from .base import Value, constant_args
from .constant import ConstantValue
from .symbolic import SymNumberValue

#: Why turning on ``requires_grad`` of a tensor breaks: inside a graph, AOTAutograd backends
#: return it without ``requires_grad`` (a wrong result), so it runs eagerly between two graphs.
MAKES_LEAF = ("{what} makes a tensor require grad, which a graph cannot do for its backends; "
              "it runs eagerly between two graphs")
#: ``torch.FloatTensor``, ``torch.cuda.LongTensor``... (dense ones: sparse classes are eager only).
_TYPED_CLASSES = frozenset(c for c in torch._tensor_classes if not c.is_sparse)


def construct(tx, cls, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """``cls(*args, **kwargs)`` for a legacy constructor class, or None when ``cls`` is not one."""
    if cls is torch.autograd.Variable:
        return variable(tx, args, kwargs)
    if cls is torch.Tensor:
        return legacy_new(tx, args, kwargs, torch.get_default_dtype(), torch.device("cpu"), "torch.Tensor")
    if cls in _TYPED_CLASSES:
        device = torch.device("cuda" if cls.is_cuda else "cpu")
        return legacy_new(tx, args, kwargs, cls.dtype, device, f"torch.{cls.__name__}")
    return None


def legacy_new(tx, args: list[Value], kwargs: dict[str, Value], dtype: torch.dtype, device: torch.device,
               what: str) -> Value:
    """A legacy constructor (or ``x.new``) making a ``dtype`` tensor on ``device``: see the module docstring."""
    from .tensor import TensorValue

    if set(kwargs) - {"device"}:
        raise GraphBreak(f"`{what}(...)` with keyword arguments {sorted(kwargs)}")
    if "device" in kwargs:
        chosen = constant_args([kwargs["device"]], {})
        if chosen is None:
            raise GraphBreak(f"`{what}(...)` with a device not known at capture time")
        if chosen[0][0] is not None:
            device = torch.device(chosen[0][0])
    options = {"dtype": ConstantValue(dtype), "device": ConstantValue(device)}
    if not args:
        return tx.graph.call("call_function", torch.empty, [ConstantValue(0)], options, what)
    if len(args) == 1 and isinstance(args[0], TensorValue):
        other = args[0].fake
        if other.dtype != dtype or other.device.type != device.type:
            raise GraphBreak(f"`{what}(t)` of a tensor of another dtype or device (eager raises TypeError)")
        return tx.graph.call("call_function", torch.ops.aten.alias.default, [args[0]], {}, what)
    if len(args) == 1 and _python_type(args[0]) in (list, tuple):
        return tx.graph.call("call_function", torch.tensor, [args[0]], options, what)
    sizes = list(args[0].iterate(tx)) if len(args) == 1 and _python_type(args[0]) is torch.Size else args
    if not all(_is_int(s) for s in sizes):
        raise GraphBreak(f"`{what}(...)` with arguments other than sizes, a sequence of values or a tensor")
    return tx.graph.call("call_function", torch.empty, sizes, options, what)


def _python_type(value: Value):
    try:
        return value.python_type()
    except GraphBreak:
        return None


def _is_int(value: Value) -> bool:
    if isinstance(value, SymNumberValue):
        return value.python_type() is int
    return isinstance(value, ConstantValue) and type(value.value) is int


def variable(tx, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.autograd.Variable(data, requires_grad=False)``: a detached alias, a new leaf."""
    from .tensor import TensorValue

    names = ("data", "requires_grad")
    if len(args) > len(names) or set(kwargs) - set(names) or set(kwargs) & set(names[:len(args)]):
        raise GraphBreak("`torch.autograd.Variable(...)` with arguments other than data and requires_grad")
    bound = dict(zip(names, args), **kwargs)
    flag = constant_args([bound.get("requires_grad", ConstantValue(False))], {})
    if flag is None or type(flag[0][0]) is not bool:
        raise GraphBreak("`torch.autograd.Variable(..., requires_grad=)` not known as a bool at capture time")
    data = bound.get("data")
    if data is None or data.is_constant() and data.as_constant() is None:
        result = legacy_new(tx, [], {}, torch.get_default_dtype(), torch.device("cpu"), "torch.autograd.Variable")
    elif isinstance(data, TensorValue):
        result = tx.graph.call("call_method", "detach", [data], {}, "torch.autograd.Variable")
    else:
        raise GraphBreak("`torch.autograd.Variable(data)` of something other than a tensor (eager raises TypeError)")
    if flag[0][0]:
        raise GraphBreak(MAKES_LEAF.format(what="`torch.autograd.Variable(..., requires_grad=True)`"))
    return result


def type_conversion(tx, tensor, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``x.type(dtype_or_class_or_name, non_blocking=False)`` as ``x.to(...)`` (``x`` itself when it already is one)."""
    if "dtype" in kwargs and not args:
        kwargs = dict(kwargs)
        args = [kwargs.pop("dtype")]
    if len(args) != 1 or set(kwargs) - {"non_blocking"}:
        raise GraphBreak("`tensor.type(...)` with arguments other than a type and non_blocking")
    const = constant_args(args, kwargs)
    if const is None:
        raise GraphBreak("`tensor.type(...)` with a type not known at capture time")
    target = const[0][0]
    if isinstance(target, str):
        target = _class_named(target)
    if isinstance(target, torch.dtype):
        dtype, device = target, tensor.fake.device
    elif target in _TYPED_CLASSES:
        dtype = target.dtype
        device = torch.device("cuda") if target.is_cuda else torch.device("cpu")
        if device.type == tensor.fake.device.type:
            device = tensor.fake.device  # ``x.type(torch.cuda.FloatTensor)`` keeps a tensor on cuda:1 there
    else:
        raise GraphBreak(f"`tensor.type({const[0][0]!r})`: not a dtype or a dense tensor type")
    options = {"dtype": ConstantValue(dtype), "device": ConstantValue(device)}
    if "non_blocking" in kwargs:
        options["non_blocking"] = kwargs["non_blocking"]
    return tx.graph.call("call_method", "to", [tensor], options, "tensor.type()")


def _class_named(name: str):
    """``'torch.cuda.FloatTensor'`` -> the class (eager accepts exactly these names)."""
    for cls in _TYPED_CLASSES:
        if f"{cls.__module__}.{cls.__name__}" == name:
            return cls
    raise GraphBreak(f"`tensor.type({name!r})`: not the name of a dense tensor type")
