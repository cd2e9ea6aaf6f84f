"""What running one graph node may change besides its result (``node_effect``, ``graph_may_mutate``).

A graph runs before the side effects recorded during its trace are
replayed.  If it raises midway, what it already changed stays changed, and
the side effects recorded before the failing operation must still happen
(issue 7 item 11).  Each node falls in one class:

* ``PURE``: nothing outside its result (in-place ops on tensors the graph
  made itself included: nobody else can see them).
* ``MODE_SWITCH``: grad mode and autocast switches.  A compiled graph with
  such nodes puts both modes back if it raises (``modes.restoring_modes_on_error``),
  so they leave nothing behind.
* ``RANDOM``: random ops (``rand``, ``dropout`` and dropout layers in training
  mode, ``bernoulli``...) on the default generators of the CPU and CUDA
  devices.  They advance the RNG state, which is observable (later random
  numbers), but cheap to save: a compiled graph with random nodes and no
  ``MUTATES`` node saves the generators' states before it runs and puts
  them back if it raises (``modes.restoring_modes_on_error``, about 1 µs per
  call, only for such graphs), so its frame's eager rerun draws the same
  numbers as eager; a graph with ``MUTATES`` nodes is never rerun, and its
  draws stand, as eager's would.  Counting them as mutations instead would
  split every training forward that updates a Python counter before its
  dropout.  A random op given ``generator=`` (not saved) is a mutation.
* ``MUTATES``: in-place ops and ``out=`` on a tensor sharing storage with a
  graph input, parameter or buffer; running-stat updates (``batch_norm`` in
  training mode); autograd calls (``backward``, hooks); RNG seeding; layers in
  training mode (other than dropout) or with ``inplace=True`` on an input.

An input changed only through ``x.data`` keeps its version counter, as in
eager (``hidden_mutations``, ``preserving_versions``: AOTAutograd writes the
change back to ``x`` itself, which would count it).

A graph without ``MUTATES`` nodes that raises has changed nothing that
stays changed, so its frame can be rerun eagerly from the start
(``codegen.rewrite``).  In a graph with ``MUTATES`` nodes no operation
follows a side effect (the tracer breaks the graph there,
``TraceContext.keep_program_order``), so when it raises, eager would not
have reached its side effects either.  This module only classifies nodes;
it never changes a graph (``preserving_versions`` wraps a compiled one).
"""
from __future__ import annotations

import functools
import inspect
import operator

import torch

PURE, MODE_SWITCH, RANDOM, MUTATES = "pure", "mode switch", "random", "mutates"

#: Random ops (on the default generators unless given ``generator=``).
_RANDOM_NAMES = {
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "bernoulli",
    "multinomial", "poisson", "binomial", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "feature_dropout", "native_dropout", "rrelu", "gumbel_softmax", "uniform",
    "exponential", "geometric", "cauchy", "log_normal", "random",
}
#: Functions that change state outside their tensor arguments: running stats, autograd, RNG seeding.
_STATEFUL_NAMES = {
    "batch_norm", "instance_norm", "native_batch_norm", "_native_batch_norm_legit", "backward", "grad",
    "retain_grad", "register_hook", "manual_seed", "seed", "set_rng_state", "record_stream",
}
_MODE_SWITCHES = {"_set_grad_enabled", "_enter_autocast", "_exit_autocast"}
_INPLACE_OPERATORS = {
    operator.setitem, operator.delitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
    operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
    operator.ilshift, operator.irshift, operator.imatmul,
}
#: Operations whose only errors are about shapes, dtypes and devices: fake propagation raises them
#: while tracing and the guards pin that metadata, so once traced they do not raise when the graph
#: runs (short of running out of memory).  Indexing, gathers, divisions, linear algebra and the
#: like raise on values (an index out of range, a zero divisor, a singular matrix) and are left out.
_METADATA_CHECKED = {
    "linear", "matmul", "mm", "bmm", "addmm", "mv", "dot", "conv1d", "conv2d", "conv3d", "add", "sub", "mul",
    "neg", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__neg__", "__matmul__", "relu",
    "gelu", "silu", "sigmoid", "tanh", "exp", "abs", "softmax", "log_softmax", "layer_norm", "view", "reshape",
    "transpose", "permute", "flatten", "contiguous", "clone", "t", "unsqueeze", "squeeze", "expand", "cat",
    "stack", "sum", "mean", "detach", "div", "true_divide", "truediv", "__truediv__", "__rtruediv__", "maximum", "minimum",
    "clamp", "pow", "__pow__", "__rpow__", "sin", "cos", "log", "sqrt", "square", "amax", "amin", "prod", "floor",
    "ceil", "round", "sign", "expm1", "log1p", "reciprocal", "__abs__", "erf",
}
#: In-place operations of the same kind.  Fake tensors do not check memory overlap, which eager refuses
#: (an expanded tensor written, an operand overlapping the written tensor), so they count as not raising
#: only when the written tensor has no internal overlap and each other tensor is a result made in the
#: graph, not a view of the written one nor of an input (``_overlap_possible``).
_INPLACE_METADATA_CHECKED = {"add_", "sub_", "mul_", "neg_", "relu_", "sigmoid_", "tanh_", "exp_", "abs_", "clamp_",
                             "zero_", "iadd", "isub", "imul"}
#: The dtypes every kernel of those operations has (fake tensors do not check that a kernel exists).
_CHECKED_DTYPES = (torch.float32, torch.float64)
#: Device types whose default generators ``modes.restoring_modes_on_error`` saves.
_SAVED_GENERATORS = ("cpu", "cuda")
_RANDOM_LAYERS = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d,
                  torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout, torch.nn.RReLU)


def node_effect(node: torch.fx.Node, external: set, module: torch.nn.Module | None = None, result=None) -> str:
    """The class of ``node``; ``external``: storages of the graph's inputs, parameters and buffers.

    ``module``: the layer of a ``call_module`` node (None: unknown, a mutation); ``result``: the node's
    fake result (default: its ``example_value``).  The class is kept in the node's ``meta`` while its
    target and arguments are the same objects (the builder classifies each node as it is made; codegen
    and the compiled graph's wrapper ask again for every node): ``external`` only grows during a trace,
    and a node reads tensors that existed before it.
    """
    known = node.meta.get(_EFFECT)
    if known is not None and known[1] is node.target and known[2] is node.args and known[3] is node.kwargs:
        return known[0]
    effect = _effect(node, external, module)
    if effect == RANDOM and not all(t.device.type in _SAVED_GENERATORS for t in
                                    _tensor_args(node) + _tensors_in(node.meta.get("example_value")
                                                                     if result is None else result)):
        effect = MUTATES
    node.meta[_EFFECT] = (effect, node.target, node.args, node.kwargs)
    return effect


_EFFECT = "dynacap_effect"


def may_raise(node: torch.fx.Node, external: set) -> bool:
    """Whether running ``node`` may raise where its fake propagation did not (on the values of its
    tensors, or for a kernel missing for their dtype); True unless it is one of the
    ``_METADATA_CHECKED`` operations (or an ``_INPLACE_METADATA_CHECKED`` one that cannot overlap) on
    ``_CHECKED_DTYPES`` tensors.  ``external``: storages of the graph's inputs, parameters and buffers."""
    name = _name_of(node.target)
    if node.op not in ("call_function", "call_method") or name not in _METADATA_CHECKED \
            and name not in _INPLACE_METADATA_CHECKED:
        return True
    arguments = _tensor_args(node)
    if not all(t.dtype in _CHECKED_DTYPES for t in arguments + _tensors_in(node.meta.get("example_value"))):
        return True
    return name in _INPLACE_METADATA_CHECKED and _overlap_possible(arguments, external)


def _overlap_possible(arguments: list, external: set) -> bool:
    """Whether eager may refuse an in-place write of ``arguments[0]`` for overlapping memory."""
    if not arguments or torch._debug_has_internal_overlap(arguments[0]) != 0:
        return True
    written = storage_of(arguments[0])
    return any(storage_of(t) is None or storage_of(t) == written or storage_of(t) in external for t in arguments[1:])


def _effect(node, external: set, module) -> str:
    if node.op == "call_module":
        if module is None:
            return MUTATES
        if getattr(module, "inplace", False) and _writes_external(node, external):
            return MUTATES
        if not module.training:
            return PURE
        if isinstance(module, _RANDOM_LAYERS) and not any(True for _ in module.buffers()):
            return RANDOM
        return MUTATES
    if node.op not in ("call_function", "call_method"):
        return PURE
    target = node.target
    name = _name_of(target)
    base = name.rstrip("_")
    if name in _MODE_SWITCHES:
        return MODE_SWITCH
    if name in _STATEFUL_NAMES or base in _STATEFUL_NAMES or "generator" in node.kwargs:
        if not _passes_false(node, "training"):
            return MUTATES
    elif name in _RANDOM_NAMES or base in _RANDOM_NAMES:
        if _passes_false(node, "training"):
            return PURE
        # ``x.bernoulli_()``, ``dropout(x, inplace=True)``: random and a write of the tensor.
        return MUTATES if writes(node) and _writes_external(node, external) else RANDOM
    return MUTATES if writes(node) and _writes_external(node, external) else PURE


def writes(node) -> bool:
    """Whether the call may write its tensor arguments."""
    target = node.target
    if node.op == "call_function" and target in _INPLACE_OPERATORS:
        return True
    schema = getattr(target, "_schema", None)  # an ATen overload (``torch.ops.aten.add_.Tensor``)
    if schema is not None and schema.is_mutable:
        return True
    name = _name_of(target)
    inplace = name.endswith("_") and not name.endswith("__")
    dunder_inplace = name.startswith("__i") or name in ("__setitem__", "__delitem__")
    return inplace or dunder_inplace or "out" in node.kwargs or not _passes_false(node, "inplace", absent=True)


def _name_of(target) -> str:
    """A call's function or method name; an ATen overload's without its overload (``add_.Tensor``: ``add_``)."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return name.split(".")[0]


def _writes_external(node, external: set) -> bool:
    return any(storage_of(t) is None or storage_of(t) in external for t in _tensor_args(node))


def external_storages(graph: torch.fx.Graph) -> set:
    """Storages of the graph's inputs, parameters and buffers."""
    found = {storage_of(n.meta.get("example_value")) for n in graph.nodes if n.op in ("placeholder", "get_attr")}
    found.discard(None)
    return found


def graph_may_mutate(graph) -> bool:
    """Whether running ``graph`` as capture wraps it (modes and RNG state put back if it raises) may leave
    changed state when it raises midway; no graph found counts as mutating."""
    if graph is None:
        return True
    external = external_storages(graph)
    for node in graph.nodes:
        module = _submodule(graph, node.target) if node.op == "call_module" else None
        if node_effect(node, external, module) == MUTATES:
            return True
    return False


def random_devices(graph: torch.fx.Graph) -> set[torch.device]:
    """The devices whose default generators the graph's random nodes may draw from (empty: none)."""
    devices = set()
    external = external_storages(graph)
    for node in graph.nodes:
        module = _submodule(graph, node.target) if node.op == "call_module" else None
        if node_effect(node, external, module) == RANDOM:
            devices.add(torch.device("cpu"))
            devices.update(t.device for t in _tensor_args(node) + _tensors_in(node.meta.get("example_value")))
    return devices


def hidden_mutations(graph: torch.fx.Graph) -> tuple[list[int], list[str]]:
    """The inputs (placeholder positions) and ``get_attr`` targets the graph changes in place only
    through ``.data`` (or views of it): eager's ``x.data`` has a version counter of its own, so such a
    change leaves ``x._version`` alone, which AOTAutograd, writing the change back to ``x`` after
    the graph, does not (``preserving_versions`` puts it back)."""
    if not any(n.target is torch._C._autograd._get_data_attr for n in graph.nodes):
        return [], []
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    hidden, direct = set(), set()
    external = external_storages(graph)
    for node in graph.nodes:
        module = _submodule(graph, node.target) if node.op == "call_module" else None
        if node_effect(node, external, module) != MUTATES or not writes(node) or node.op == "call_module":
            continue
        written = node.kwargs.get("out", node.args[0] if node.args else None)
        root, through_data = _alias_root(written)
        if root is not None:
            (hidden if through_data else direct).add(root)
    roots = hidden - direct
    return ([i for i, p in enumerate(placeholders) if p in roots],
            [n.target for n in roots if n.op == "get_attr"])


def _alias_root(node):
    """``(input or parameter node, whether reached through .data)`` that ``node`` is a view of (following
    first arguments while the storage stays the same); ``(None, False)`` when that is not known."""
    storage = storage_of(node.meta.get("example_value")) if isinstance(node, torch.fx.Node) else None
    through_data = False
    while isinstance(node, torch.fx.Node) and storage is not None:
        if node.op in ("placeholder", "get_attr"):
            return node, through_data
        if node.target is torch._C._autograd._get_data_attr:
            through_data = True
        node = node.args[0] if node.args else None
        if not isinstance(node, torch.fx.Node) or storage_of(node.meta.get("example_value")) != storage:
            return None, False
    return None, False


def preserving_versions(compiled, gm: torch.fx.GraphModule):
    """``compiled`` leaving the version counters of the tensors ``hidden_mutations`` names as they were
    before the call (eager's ``.data`` semantics under AOTAutograd backends); the same ``compiled``
    when there are none (no cost)."""
    positions, targets = hidden_mutations(gm.graph)
    if not positions and not targets:
        return compiled
    attrs = tuple(_attr(gm, t) for t in targets)

    def run_graph(*args):
        tensors = tuple(args[i] for i in positions) + attrs
        versions = tuple(t._version for t in tensors)
        try:
            return compiled(*args)
        finally:
            torch._C._autograd._unsafe_set_version_counter(tensors, versions)

    return run_graph


def _attr(gm: torch.fx.GraphModule, target: str) -> torch.Tensor:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def storage_of(fake):
    try:
        return fake.untyped_storage()._cdata
    except (AttributeError, NotImplementedError, RuntimeError):
        return None


def _passes_false(node, parameter: str, absent: bool = False) -> bool:
    """Whether the call gives ``parameter`` the value False (by keyword, position or default).

    ``absent``: the answer when the callee has no such parameter or no
    readable signature (torch's C functions: they take no ``inplace`` flag,
    their in-place forms end with ``_``); a call that cannot be bound to its
    signature counts as not passing False.
    """
    if parameter in node.kwargs:
        return node.kwargs[parameter] is False
    try:
        signature = _signature(node.target) if node.op == "call_function" else None
    except TypeError:  # an unhashable target
        signature = None
    if signature is None or parameter not in signature.parameters:
        return absent
    try:
        bound = signature.bind(*node.args, **node.kwargs)
    except TypeError:
        return False
    bound.apply_defaults()
    return bound.arguments[parameter] is False


@functools.lru_cache(maxsize=1024)
def _signature(target) -> inspect.Signature | None:
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


def _tensor_args(node) -> list:
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n.meta.get("example_value")))
    return [t for t in found if isinstance(t, torch.Tensor)]


def _tensors_in(value) -> list:
    values = value if isinstance(value, (tuple, list)) else [value]
    return [t for t in values if isinstance(t, torch.Tensor)]


def _submodule(graph, target):
    owner = graph.owning_module
    if owner is None:
        return None
    try:
        return owner.get_submodule(target)
    except AttributeError:
        return None
