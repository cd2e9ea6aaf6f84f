"""``tensor.grad``: read through its source, assigned as a side effect replayed after the graph.

A tensor reached from the frame has its ``.grad`` reached too (``p.grad`` is
an input of the graph, or ``None``, guarded like any input).  Assigning
``p.grad = t`` (``None`` in ``zero_grad``) is recorded as an attribute write
of the tensor, replayed after the graph in program order; reads after it in
the same trace see the assigned value.  Tensors made inside the graph have no
``.grad`` yet that the trace could know: reading it breaks.
"""
from __future__ import annotations

from ..errors import GraphBreak
from ..source import AttrSource
from .base import DELETED, Value
from .constant import ConstantValue


def real_tensor(tx, value) -> object | None:
    """The runtime tensor a graph input or attribute stands for, or None for one made in the graph."""
    node = value.node
    if node.op == "placeholder":
        for graph_input in tx.graph.inputs:
            if graph_input.node is node:
                return graph_input.example
    if node.op == "get_attr":
        return tx.graph.attrs.get(node.target)
    return None


def read_grad(tx, value) -> Value:
    """``value.grad``."""
    from .wrap import wrap

    tensor = real_tensor(tx, value) if value.source is not None else None
    if tensor is None:
        from ..graph.effects import storage_of

        fake = getattr(value, "fake", None)
        if value.source is None and fake is not None and not fake.requires_grad \
                and storage_of(fake) not in tx.graph.external:
            # A new leaf of the graph (no input's storage): nothing could give it a grad (assigning one breaks).
            return ConstantValue(None)
        raise GraphBreak("`.grad` of a tensor made in the captured code is not known at capture time")
    override = tx.attribute_override(tensor, "grad")
    if override is DELETED:
        return ConstantValue(None)
    if override is not None:
        return override
    return wrap(tx, tensor.grad, AttrSource(value.source, "grad"))


def write_grad(tx, value, new: Value) -> None:
    """``value.grad = new``: ``None`` or a tensor of the same shape, dtype and device (as eager checks)."""
    tensor = real_tensor(tx, value) if value.source is not None else None
    if tensor is None:
        raise GraphBreak("assigning `.grad` of a tensor made in the captured code")
    if not (new.is_constant() and new.as_constant() is None):
        fake, new_fake = value.fake, getattr(new, "fake", None)
        if new_fake is None or (new_fake.shape, new_fake.dtype, new_fake.device) != \
                (fake.shape, fake.dtype, fake.device):
            raise GraphBreak(f"assigning `.grad` = {new.describe()} to {value.describe()}: eager checks its "
                             "type, shape, dtype and device")
    tx.record_setattr(_GradOwner(value, tensor), "grad", new)


class _GradOwner(Value):
    """The tensor whose ``.grad`` is written, as the target of the replayed attribute write."""

    def __init__(self, value, tensor):
        self.value = value
        self.tensor = tensor
        self.source = value.source

    def describe(self):
        return self.value.describe()

    def real_object(self):
        return self.tensor

    def reconstruct(self, cg) -> None:
        self.value.reconstruct(cg)
