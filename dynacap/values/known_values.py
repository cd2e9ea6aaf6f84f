"""The values of small integer tensors, known at capture time: for kernels whose output shapes they decide.

``pack_padded_sequence`` turns its ``lengths`` into ``batch_sizes``, and the
packed recurrent layers and ``pad_packed_sequence`` read those: under static shapes the
packed data's size is a function of those values.  ``known_values`` answers
them for a tensor of the frame (a CPU integer tensor of at most
``INPUT_LIMIT`` elements, guarded on its values, so new values recompile) or
one the trace made from such tensors and constants by pure operations
(``torch.tensor([...])``, ``.to``, ``sort``, indexing), which it runs for real.
A frame tensor whose code was captured before with other values there is not
read (``dynamic.ShapePolicy.values_readable``): values that change from call
to call recompile once.
It refuses (None) a tensor the graph may have written before the question:
any operation that writes an input, or writes one of the tensors the answer
comes from or a result of theirs (in place, ``out=``, a layer).  It never
adds a node.
"""
from __future__ import annotations

import operator

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.node import map_aggregate

from ..graph.effects import writes

#: Largest frame tensor whose values are guarded (the guard compares them all on every call).
INPUT_LIMIT = 64
#: Largest tensor the evaluation makes (its operations run on the host at capture time).
RESULT_LIMIT = 4096
_INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
#: Functions and methods that compute a new value from their arguments and write nothing.
_PURE_FUNCTIONS = {torch.tensor, torch.as_tensor, torch.sort, torch.argsort, torch.flip, torch.cumsum,
                   torch.index_select, torch.arange, operator.getitem}
_PURE_METHODS = {"to", "cpu", "long", "int", "clone", "contiguous", "flip", "sort", "argsort", "cumsum",
                 "index_select", "__getitem__"}


def known_values(tx, value) -> torch.Tensor | None:
    """The values ``value`` (a ``TensorValue``) holds at this point of the trace, or None if they are not
    known at capture time.  A frame tensor they come from is guarded on its values."""
    node = getattr(value, "node", None)
    if node is None or not tx.ctx.guards_kept:
        # An exported program keeps no guards: the values would be fixed in it for every later input.
        return None
    guards: list = []
    with unset_fake_temporarily():  # the trace runs under the fake mode: these operations run for real
        known = _evaluate(tx, node, {}, guards)
    if not isinstance(known, torch.Tensor):
        return None
    for source, tensor in guards:
        values = tensor.tolist()  # ints or bools: their repr is a literal, so equal guards are one
        tx.guards.add("TENSOR_MATCH", source, f"{{s}}.tolist() == {values!r}",
                      f"the values of {source.expr()} == {values}")
    return known


def _evaluate(tx, node, memo: dict, guards: list):
    """The real result of ``node`` (a tensor or a tuple of them), or None."""
    if node in memo:
        return memo[node]
    memo[node] = None
    if any(_may_write(user) for user in _users_through(node)):
        return None
    if node.op == "placeholder":
        result = _frame_tensor(tx, node, guards)
    elif node.op in ("call_function", "call_method") and _pure(node):
        missing = []

        def real(arg):
            if isinstance(arg, torch.fx.Node):
                found = _evaluate(tx, arg, memo, guards)
                if found is None:
                    missing.append(arg)
                return found
            if isinstance(arg, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                missing.append(arg)
            return arg

        args, kwargs = map_aggregate(node.args, real), map_aggregate(node.kwargs, real)
        if missing or not _small(args) or not _small(kwargs):
            return None
        if node.op == "call_method":
            args = list(args)
            result = getattr(args.pop(0), node.target)(*args, **kwargs)
        else:
            result = node.target(*args, **kwargs)
        if not _small(result) or not _on_host(result):
            return None
    else:
        return None
    memo[node] = result
    return result


def _frame_tensor(tx, node, guards: list) -> torch.Tensor | None:
    """A graph input's values, if it is a small CPU integer tensor of static shape nothing in the graph wrote."""
    if tx.graph.mutations:
        return None  # a write of some input, which may alias this one
    graph_input = next((i for i in tx.graph.inputs if i.node is node), None)
    if graph_input is None:
        return None
    tensor, fake = graph_input.example, graph_input.fake
    if type(tensor) is not torch.Tensor or tensor.device.type != "cpu" or tensor.dtype not in _INTEGER_DTYPES \
            or tensor.requires_grad or tensor.numel() > INPUT_LIMIT \
            or not all(isinstance(d, int) for d in fake.shape):
        return None
    policy = tx.ctx.shapes
    if policy is not None and not policy.values_readable(graph_input.source.expr(), tuple(tensor.tolist())):
        return None  # other values before: read again, they would recompile on every new one
    guards.append((graph_input.source, tensor))
    return tensor.clone()


def _pure(node) -> bool:
    if node.op == "call_method":
        return node.target in _PURE_METHODS
    return node.target in _PURE_FUNCTIONS


def _users_through(node):
    """The nodes that use ``node``, and those that use them, and so on (a result may be a view of it)."""
    seen, todo = set(), list(node.users)
    while todo:
        user = todo.pop()
        if user not in seen:
            seen.add(user)
            todo.extend(user.users)
            yield user


def _may_write(node) -> bool:
    if node.op == "call_module":
        return True
    return node.op in ("call_function", "call_method") and writes(node)


def _tensors(obj) -> list:
    found = []
    map_aggregate(obj, lambda a: found.append(a) if isinstance(a, torch.Tensor) else None)
    return found


def _small(obj) -> bool:
    return all(t.numel() <= RESULT_LIMIT and not t.requires_grad for t in _tensors(obj))


def _on_host(obj) -> bool:
    return all(t.device.type == "cpu" and type(t) is torch.Tensor for t in _tensors(obj))
