"""Running a captured backward graph: pure stretches compiled by the backend, opaque nodes called as they are.

``BackwardProgram`` splits the graph ``capture.BackwardCapture`` recorded
into steps, in the engine's order: a *segment* (a maximal stretch of pure
nodes: C++ formulas, gradient sums) is lowered to ATen by ``make_fx`` and
compiled by the backend the first time it runs with given input metadata
and lifted sizes (``Segment.variants``, the segment's own guard; per
backend: the engine's cache of programs is keyed by graph structure only,
so the backend is the one of the ``enable`` block the backward runs in); an
*opaque* node (a hook, a Python backward, ``AccumulateGrad``) runs in
Python every time.  ``AccumulateGrad`` of a leaf without post-accumulate
hooks may wait until the segment it follows has run: only pure nodes sit
between, and none of them reads ``.grad``.

Must not change what eager observes: hooks run once per backward, in the
engine's order, with grad mode off (as the eager engine runs them).
"""
from __future__ import annotations

import operator

import torch
import torch.fx
import torch.utils._pytree as pytree

from .capture import is_opaque

#: Compiled variants kept per segment; past this it runs uncompiled (still exact), as a guard would fail too often.
MAX_VARIANTS = 8


def _evaluate(node, env):
    args = torch.fx.node.map_arg(node.args, env.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
    return node.target(*args, **kwargs)


class PythonStep:
    """One node run as it is: an opaque call, or an item of a lifted list or of an opaque call's result."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def run(self, env):
        env[self.node] = _evaluate(self.node, env)


class Segment:
    """A stretch of pure nodes, compiled by the backend per input metadata (``variants``)."""

    def __init__(self, nodes):
        self.nodes = nodes
        members = set(nodes)
        inputs: dict = {}
        for node in nodes:
            for arg in node.all_input_nodes:
                if arg not in members:
                    inputs.setdefault(arg, None)
        self.inputs = list(inputs)
        self.outputs = [n for n in nodes if any(u not in members for u in n.users)]
        self.variants: dict = {}  # backend -> input key -> (compiled, output leaves, output spec)

    def run(self, env, backend, record):
        leaves, spec = pytree.tree_flatten([env[n] for n in self.inputs])
        key = tuple(_leaf_key(leaf) for leaf in leaves)
        variants = self.variants.setdefault(backend, {})
        variant = variants.get(key)
        if variant is None:
            if len(variants) >= MAX_VARIANTS:
                results = self._interpret([env[n] for n in self.inputs])
                env.update(zip(self.outputs, results))
                return
            variant = variants[key] = self._compile(leaves, spec, backend, record)
        compiled, out_leaves, out_spec = variant
        tensors = compiled(*[leaf for leaf in leaves if isinstance(leaf, torch.Tensor)])
        it = iter(tensors)
        results = pytree.tree_unflatten([next(it) if leaf is _TENSOR else leaf for leaf in out_leaves], out_spec)
        env.update(zip(self.outputs, results))

    def _interpret(self, values):
        env = dict(zip(self.inputs, values))
        for node in self.nodes:
            env[node] = _evaluate(node, env)
        return [env[n] for n in self.outputs]

    def _compile(self, leaves, spec, backend, record):
        """Lower the segment to ATen for these inputs (non-tensor leaves are constants of the key), then compile."""
        from torch.fx.experimental.proxy_tensor import make_fx

        positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        shape: list = []

        def lowered(*tensors):
            flat = list(leaves)
            for i, t in zip(positions, tensors):
                flat[i] = t
            out_leaves, out_spec = pytree.tree_flatten(self._interpret(pytree.tree_unflatten(flat, spec)))
            shape[:] = [[_TENSOR if isinstance(o, torch.Tensor) else o for o in out_leaves], out_spec]
            return tuple(o for o in out_leaves if isinstance(o, torch.Tensor))

        example = [leaves[i] for i in positions]
        gm = make_fx(lowered, tracing_mode="fake")(*example)
        if record is not None:
            record.graphs.append(gm)
        compiled = backend(gm, example)
        return compiled, shape[0], shape[1]


class _TensorSlot:
    def __repr__(self):
        return "<tensor>"


_TENSOR = _TensorSlot()


def _leaf_key(leaf):
    if isinstance(leaf, torch.Tensor):
        return (leaf.shape, leaf.stride(), leaf.dtype, leaf.device, leaf.requires_grad, leaf.storage_offset())
    if isinstance(leaf, float):
        return (float, leaf.hex())  # -0.0 and NaN keep variants of their own
    return (type(leaf), leaf)


class BackwardProgram:
    """The steps of one captured backward; ``run`` is the engine's runtime wrapper (called on every backward).

    ``current()`` gives the ``(backend, record)`` to compile segments with when it runs; ``None`` (the
    engine's compiled autograd switched on by someone else, who hit this cached program) means the ones
    it was captured with.
    """

    def __init__(self, gm: torch.fx.GraphModule, backend, record, current):
        self.gm = gm
        self.backend, self.record, self.current = backend, record, current
        self.steps = plan(gm)
        nodes = list(gm.graph.nodes)
        self.placeholders = nodes[:5]
        self.output = nodes[-1]

    def run(self, _compiled, inputs, sizes, scalars, hooks, packed_data):
        env = dict(zip(self.placeholders, (inputs, sizes, scalars, hooks, packed_data)))
        backend, record = self.current() or (self.backend, self.record)
        with torch.no_grad():  # the eager engine runs formulas and hooks with grad mode off (no create_graph)
            for step in self.steps:
                if type(step) is Segment:
                    step.run(env, backend, record)
                else:
                    step.run(env)
        return [env[n] if isinstance(n, torch.fx.Node) else n for n in self.output.args[0]]

    def __call__(self, *args):
        return self.run(self, *args)


def plan(gm) -> list:
    """The graph's nodes as steps, in graph order (the engine's), pure stretches merged into segments."""
    steps: list = []
    pending: list = []
    pending_set: set = set()
    waiting: list = []  # AccumulateGrad steps that may run once the pending segment has

    def flush():
        if pending:
            steps.append(Segment(list(pending)))
            pending.clear()
            pending_set.clear()
        steps.extend(waiting)
        waiting.clear()

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            flush()
            break
        if is_opaque(node):
            if node.target.__name__ == "accumulate_grad" and not node.args[3] and not node.users:
                waiting.append(PythonStep(node))
                continue
            flush()
            steps.append(PythonStep(node))
        elif node.target is operator.getitem and node.args[0] not in pending_set:
            steps.append(PythonStep(node))  # an item of a lifted list or of a result already in the env
        else:
            pending.append(node)
            pending_set.add(node)
    return steps
