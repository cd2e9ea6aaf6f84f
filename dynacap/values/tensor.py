"""``TensorValue``: a tensor in the graph, an FX node plus its fake tensor.

Metadata (shape, dtype, device, ``dim()``...) is answered from the fake
tensor at capture time: static sizes are constants (guarded), symbolic
ones (dynamic shapes) ``size`` nodes giving ``SymNumberValue``s.  Operations become
graph nodes through ``tx.graph.call``.  Anything that needs the tensor's
*data* in Python (``if x.sum() > 0``, ``.item()``, ``.tolist()``) is a
graph break with a reason that says so; with ``config.capture_scalar_outputs``
``.item()``/``.tolist()``/``int(t)``/``float(t)`` stay in the graph as
data-dependent symbols, and only Python code needing their value breaks.
"""
from __future__ import annotations

import builtins
import operator

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from .. import config
from ..errors import GraphBreak
from . import legacy_tensors
from .base import Value
from .constant import ConstantValue
from .grads import read_grad, write_grad
from .containers import ListValue, SizeValue, TupleValue
from .methods import MethodOfValue

#: Attributes answered from the fake tensor as constants.
_META_ATTRS = {"dtype", "device", "layout", "requires_grad", "is_cuda", "is_sparse", "is_quantized",
               "is_meta", "is_leaf", "ndim", "is_mkldnn"}
#: Methods answered from the fake tensor (as constants, or symbolic through ``_SYMBOLIC_METHODS``).
_META_METHODS = {"dim", "ndimension", "numel", "nelement", "element_size", "is_contiguous", "is_floating_point",
                 "is_complex", "stride", "get_device", "is_signed", "storage_offset", "size"}
#: Attributes that are new tensors (views): captured as ``getattr`` nodes.
_TENSOR_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}
#: Largest tensor whose ``.tolist()`` is captured (one graph node per element).
_TOLIST_LIMIT = 64
#: Calls that need real data in Python.
_DATA_DEPENDENT = {
    "item": "`.item()` reads a tensor's value into Python",
    "tolist": "`.tolist()` reads a tensor's values into Python",
    "data_ptr": "`.data_ptr()` reads a real memory address",
    "__bool__": "`bool()` of a tensor depends on its value",
    "backward": "`.backward()` runs autograd eagerly",
    "register_hook": "`.register_hook()` registers a Python hook",
}


def python_attribute(cls: type, name: str) -> bool:
    """Whether ``t.name = v`` on a tensor of class ``cls`` only stores ``v`` in the tensor's ``__dict__``:
    the class's ``__setattr__`` is ``object``'s and no class in its MRO defines ``name`` (a property,
    method or slot of ``torch.Tensor`` or of a subclass would run code or refuse)."""
    if name.startswith("__") or getattr(cls, "__setattr__", None) is not object.__setattr__:
        return False
    return not any(name in vars(k) for k in type.__dict__["__mro__"].__get__(cls))


class TensorValue(Value):
    def __init__(self, node, fake: torch.Tensor, source=None, real_type: type = torch.Tensor):
        self.node = node
        self.fake = fake
        self.source = source
        #: The runtime class (``nn.Parameter`` for parameters; fake tensors hide it).
        self.real_type = real_type
        #: dim -> the ``SymNumberValue`` of a symbolic size already read (one node per dim).
        self._symbolic_sizes: dict = {}

    def kind(self) -> str:
        return "tensor"

    def describe(self) -> str:
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"tensor{where} {str(self.fake.dtype).removeprefix('torch.')}{list(self.fake.shape)}"

    def python_type(self):
        return self.real_type

    def truth(self, tx) -> bool:
        raise GraphBreak(
            "`if` (or `and`/`or`/`not`/`bool()`) on a tensor value: the branch depends on data; "
            "use torch.where or torch.cond to keep it in the graph"
        )

    def size_item(self, tx, dim: int) -> Value:
        """``x.size(dim)``: a constant, or a ``size`` node (one per dim) when the dim is symbolic."""
        d = self.fake.shape[dim]
        if isinstance(d, int):
            return ConstantValue(d)
        dim %= self.fake.dim()
        known = self._symbolic_sizes.get(dim)
        if known is None or getattr(known.node, "_erased", False):
            # ``x.size(d)`` rather than ``aten.sym_size``: the same for every backend, and a plain
            # method call (not a dispatcher op) when the graph runs as Python.
            known = self._symbolic_sizes[dim] = tx.graph.call(
                "call_method", "size", [self, ConstantValue(dim)], {}, "tensor.size()")
        return known

    def missing_attribute(self, tx, name: str) -> GraphBreak:
        """``t.name`` that ``torch.Tensor`` lacks: a catchable ``AttributeError`` where the trace knows the tensor
        has no such attribute of its own; a break where it may (its class, its ``__dict__``, an alias)."""
        from ..graph.effects import storage_of
        from .exceptions import AttributeMissing
        from .grads import real_tensor

        reason = f"tensors have no attribute {name!r}"
        if hasattr(self.real_type, name):
            return GraphBreak(f"{reason}: `.{name}` of its class {self.real_type.__name__} is not captured")
        if self.source is not None:
            real = real_tensor(tx, self)
            if real is None or name in real.__dict__:
                return GraphBreak(f"attribute `.{name}` of {self.describe()}, set outside the captured code")
            tx.guards.add("NOT_PRESENT", self.source, f"{name!r} not in {{s}}.__dict__",
                          f"{self.source.expr()} has no attribute {name!r} of its own")
        elif storage_of(self.fake) in tx.graph.external:
            return GraphBreak(f"{reason} (an alias of an input, which may have it)")
        return AttributeMissing(reason, message=f"'{self.real_type.__name__}' object has no attribute '{name}'")

    def sizes(self, tx) -> SizeValue:
        return SizeValue([self.size_item(tx, i) for i in range(self.fake.dim())])

    def getattr(self, tx, name: str) -> Value:
        if name == "shape":
            return self.sizes(tx)
        stored = tx.attribute_override(self, name)
        if stored is not None:
            return stored  # a Python attribute this trace assigned (``python_attribute``)
        if name in _META_ATTRS:
            return ConstantValue(getattr(self.fake, name))
        if name in _TENSOR_ATTRS:
            return tx.graph.call("call_function", builtins.getattr, [self, ConstantValue(name)], {}, f"tensor.{name}")
        if name == "data":
            return self.data(tx)
        if name == "grad":
            return read_grad(tx, self)
        if name in ("grad", "grad_fn", "_version"):
            raise GraphBreak(f"`tensor.{name}` is not captured (it reads autograd/storage state)")
        attr = getattr(torch.Tensor, name, None)
        if attr is None:
            raise self.missing_attribute(tx, name)
        if callable(attr):
            return TensorMethodValue(self, name)
        raise GraphBreak(f"tensor attribute `.{name}` is not supported")

    def data(self, tx) -> Value:
        """``x.data``: the same storage, no autograd history, and a version counter of its own
        (an in-place change through it is hidden from autograd, as in eager)."""
        return tx.graph.call("call_function", torch._C._autograd._get_data_attr, [self], {}, "tensor.data")

    def setattr(self, tx, name: str, value: Value) -> None:
        if name == "grad":
            write_grad(tx, self, value)
            return
        if name == "data":
            self.assign_data(tx, value)
            return
        if python_attribute(self.real_type, name):
            # Stored in the tensor's instance dict, nothing else: replayed on the real tensor (the graph's
            # output, or the frame's tensor) after the graph; reads later in the trace see the value.
            tx.record_tensor_setattr(self, name, value)
            return
        super().setattr(tx, name, value)

    def assign_data(self, tx, value: Value) -> None:
        """``x.data = t``: ``x`` takes ``t``'s storage in place, its autograd identity and version counter
        unchanged.  One graph op on ``x`` (``set_`` without autograd), so later reads of ``x`` see ``t``'s
        data; only where nothing else can tell ``set_`` from eager's ``.data =`` (``_data_assignment_break``)."""
        reason = _data_assignment_break(tx, self, value)
        if reason is not None:
            raise GraphBreak(f"`tensor.data = ...` {reason}: it runs eagerly between two graphs")
        alias = self.data(tx)
        grad = torch.is_grad_enabled()
        tx.graph.set_grad_enabled(False)
        torch._C._set_grad_enabled(False)
        try:
            tx.graph.call("call_function", _assign_data_on_fakes_, [alias, value, self], {}, "tensor.data = ...")
            # The fakes keep their storages (the graph's effects are read from them); the graph runs set_.
            node = tx.graph.created[-1]
            assert node.target is _assign_data_on_fakes_
            node.target = assign_data_
        finally:
            torch._C._set_grad_enabled(grad)
            tx.graph.set_grad_enabled(grad)

    def iterate(self, tx):
        if self.fake.dim() == 0:
            raise GraphBreak("iterating over a 0-d tensor")
        length = self.fake.shape[0]
        if isinstance(length, torch.SymInt) and free_unbacked_symbols(length):
            raise GraphBreak("iterating over a tensor whose length depends on tensor data (`nonzero`, a mask)")
        return [self.getitem(tx, ConstantValue(i)) for i in range(length)]

    # -- values read into Python (``config.capture_scalar_outputs``) ---------------------------------
    def item(self, tx) -> Value:
        """``t.item()`` as a graph node: a symbol read from the data (unbacked) that later operations use."""
        return tx.graph.call("call_method", "item", [self], {}, "tensor.item()")

    def tolist(self, tx) -> Value:
        """``t.tolist()``: nested lists of ``item`` symbols (one per element, so sizes must be known)."""
        if self.fake.dim() == 0:
            return self.item(tx)
        if not all(isinstance(d, int) for d in self.fake.shape) or self.fake.numel() > _TOLIST_LIMIT:
            raise GraphBreak(f"`.tolist()` of a tensor of symbolic size or more than {_TOLIST_LIMIT} elements")
        return ListValue([row.tolist(tx) for row in self.iterate(tx)])

    def python_number(self, tx, kind: type) -> Value:
        """``int(t)`` / ``float(t)`` of a one-element tensor, as ``item`` in the graph (truncated or widened
        as Python would); a break unless ``config.capture_scalar_outputs``."""
        fake = self.fake
        if not config.capture_scalar_outputs or kind not in (int, float) or fake.dtype is torch.bool \
                or fake.is_complex() or fake.numel() != 1:
            raise GraphBreak(f"`{kind.__name__}()` of a tensor reads its value into Python")
        value = self.item(tx)
        if (kind is int) == fake.is_floating_point():
            convert = torch.sym_int if kind is int else torch.sym_float
            value = tx.graph.call("call_function", convert, [value], {}, f"{kind.__name__}(tensor)")
        return value

    def getitem(self, tx, index: Value) -> Value:
        return tx.graph.call("call_function", operator.getitem, [self, index], {}, "tensor[...]")

    def setitem(self, tx, index: Value, value: Value) -> None:
        tx.graph.call("call_function", operator.setitem, [self, index, value], {}, "tensor[...] = ...")

    def reconstruct(self, cg) -> None:
        cg.load_tensor(self)


def _size(tx, t: TensorValue, dim=None):
    return t.sizes(tx) if dim is None else t.size_item(tx, dim)


def _numel(tx, t: TensorValue):
    n = t.fake.numel()
    if isinstance(n, int):
        return ConstantValue(n)
    return tx.graph.call("call_method", "numel", [t], {}, "tensor.numel()")


def _stride(tx, t: TensorValue, dim=None):
    strides = t.fake.stride()
    if all(isinstance(s, int) for s in strides):
        return None
    dims = range(t.fake.dim()) if dim is None else [dim % t.fake.dim()]
    items = [ConstantValue(strides[d]) if isinstance(strides[d], int) else
             tx.graph.call("call_method", "stride", [t, ConstantValue(d)], {}, "tensor.stride()")
             for d in dims]
    return TupleValue(items) if dim is None else items[0]


def _requires_grad(t: TensorValue, args, kwargs) -> Value:
    """``x.requires_grad_(flag=True)``: ``x`` itself when that changes nothing, else a break."""
    from .base import constant_args

    const = constant_args(args, kwargs)
    flag = None
    if const is not None and len(const[0]) + len(const[1]) <= 1:
        flag = const[0][0] if const[0] else const[1].get("requires_grad", True)
    if flag is not None and bool(flag) == t.fake.requires_grad:
        return t  # already so: nothing changes
    raise GraphBreak(legacy_tensors.MAKES_LEAF.format(what="`tensor.requires_grad_()`")
                     if flag is not False else "`tensor.requires_grad_(False)` changes autograd state; it runs eagerly")


def assign_data_(data: torch.Tensor, new: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor.data = new`` as a graph op (under no_grad).  Eager's ``.data =`` bumps no version counter:
    ``set_``'s bump is undone at once (for what the graph saves for backward after it), and ``data``,
    ``tensor.data``, names the alias the change is written through, so ``graph.effects.hidden_mutations``
    puts the counter back after graphs whose backend writes the change back to ``tensor`` itself."""
    version = tensor._version
    tensor.set_(new)
    torch._C._autograd._unsafe_set_version_counter((tensor,), (version,))
    return tensor


def _assign_data_on_fakes_(data: torch.Tensor, new: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """``assign_data_`` while tracing: ``new`` has ``tensor``'s metadata (``_data_assignment_break``), so the
    fake stays as it is."""
    return tensor


def _data_assignment_break(tx, target: "TensorValue", value: Value) -> str | None:
    """Why ``target.data = value`` cannot be a graph op, or None.

    ``set_`` is ``.data =`` for the graph's own tensors; it differs where another tensor sees the storage
    swap (AOTAutograd regenerates views and aliases of a changed input from its new value, eager leaves
    them on the old storage), so a target other tensors alias, or a new value the code still holds, breaks;
    and the fakes keep their metadata, so the new value must have the target's.
    """
    from ..graph.effects import storage_of

    if value.kind() != "tensor":
        return f"with {value.describe()} (TypeError at run time: it takes a tensor)"
    if target.source is None:
        return "on a tensor made in the captured code"
    old, new = target.fake, value.fake
    if (old.dtype, old.device, old.layout) != (new.dtype, new.device, new.layout) or old.layout != torch.strided:
        return f"changing a {old.dtype} {old.device} tensor into a {new.dtype} {new.device} one"
    if any(isinstance(d, torch.SymInt) for d in (*old.shape, *new.shape)) or _layout(old) != _layout(new):
        return "with a tensor of another shape or layout (its sizes, strides and offset become the tensor's)"
    if any(user.target is not torch._C._autograd._get_data_attr for user in target.node.users):
        return "on a tensor an earlier operation of the graph used (autograd may have saved it, or a view of it)"
    own, given = storage_of(old), storage_of(new)
    if own is None or given is None or given in tx.graph.external:
        return "with an input, parameter or buffer (the two would share storage)"
    graph_inputs = [n for n in tx.graph.graph.nodes if n.op in ("placeholder", "get_attr")
                    and storage_of(n.meta.get("example_value")) == own]
    if len(graph_inputs) != 1:
        return "on a tensor sharing its storage with another input"
    for held in _held_tensors(tx):
        storage = storage_of(held.fake)
        if storage == given:
            return "with a tensor the code keeps (it would stay an alias of the tensor)"
        if storage == own and held.node is not target.node:
            return "on a tensor whose `.data` or views the code keeps (they keep the old storage)"
    return None


def _layout(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def _held_tensors(tx):
    """Every tensor value the trace can still reach: each frame's stack, locals and cells, containers,
    objects and attributes written, globals stored (searched through containers and objects)."""
    roots = [tx.ctx.containers, tx.ctx.attribute_overrides, tx.ctx.global_overrides, tx.ctx.side_effects]
    frame = tx
    while frame is not None:
        roots.append(frame)
        frame = frame.parent
    seen, found, pending = set(), [], list(roots)
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, TensorValue):
            found.append(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            pending.extend(item)
        elif isinstance(item, type(tx)):  # a frame of the chain, or a generator's suspended one
            pending.extend([item.stack, item.locals, item.cells, item.frame_values])
        elif isinstance(item, Value) or hasattr(item, "__dict__") and type(item).__module__.startswith("dynacap."):
            pending.extend(vars(item).values())
    return found


#: Metadata methods whose answer may be symbolic: ``(tx, tensor, *args) -> Value`` (None: answer as a constant).
_SYMBOLIC_METHODS = {"size": _size, "numel": _numel, "nelement": _numel, "stride": _stride}


class TensorMethodValue(MethodOfValue):
    """``tensor.method`` before the call."""

    def describe(self) -> str:
        return f"method tensor.{self.name}"

    def call(self, tx, args, kwargs):
        name = self.name
        if name in ("item", "tolist") and config.capture_scalar_outputs and not args and not kwargs:
            return self.owner.item(tx) if name == "item" else self.owner.tolist(tx)
        if name == "numpy":
            from .numpy_ns import tensor_numpy

            return tensor_numpy(tx, self.owner, args, kwargs)  # breaks itself where eager would raise
        if name in _DATA_DEPENDENT:
            raise GraphBreak(f"{_DATA_DEPENDENT[name]}; this cannot be captured in a graph"
                             + (" (keep the value as a tensor, or set dynacap.config.capture_scalar_outputs=True, "
                                "to stay in the graph)" if name in ("item", "tolist") else ""))
        if name in _META_METHODS:
            from .base import constant_args

            const = constant_args(args, kwargs)
            if const is None:
                raise GraphBreak(f"`tensor.{name}()` with non-constant arguments")
            symbolic = _SYMBOLIC_METHODS.get(name)
            if symbolic is not None:
                result = symbolic(tx, self.owner, *const[0], **const[1])
                if result is not None:
                    return result
            result = getattr(self.owner.fake, name)(*const[0], **const[1])
            if isinstance(result, torch.Size):
                return SizeValue([ConstantValue(d) for d in result])
            if isinstance(result, (torch.SymInt, torch.SymBool, torch.SymFloat)):
                # Another symbolic answer (``is_contiguous()`` on symbolic sizes): specialized, and guarded.
                result = {torch.SymInt: int, torch.SymBool: bool, torch.SymFloat: float}[type(result)](result)
            return ConstantValue(result)
        if name == "type":
            if not args and not kwargs:
                return ConstantValue(self.owner.fake.type())
            return legacy_tensors.type_conversion(tx, self.owner, args, kwargs)
        if name == "requires_grad_":
            return _requires_grad(self.owner, args, kwargs)
        if name == "new":
            fake = self.owner.fake
            return legacy_tensors.legacy_new(tx, args, kwargs, fake.dtype, fake.device, "tensor.new")
        return tx.graph.call("call_method", name, [self.owner, *args], kwargs, f"tensor.{name}()")
