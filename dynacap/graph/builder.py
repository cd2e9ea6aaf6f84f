"""``GraphBuilder``: the ``torch.fx.Graph`` of one trace and its fake-tensor propagation.

Every torch operation the interpreter captures goes through ``call``: the
node is added to the graph and the operation is run on fake tensors
(``FakeTensorMode``) to learn the result's metadata, never on real data;
``propagation.Propagation`` makes a result again from metadata it recorded
where the same operation met the same metadata before.
The fake mode is entered once per trace (``propagating``), not per op:
fewer transitions, and fewer moments where an interrupt could leave it
half entered; ``call`` enters it itself only when used outside that block.
Graph inputs are tensors reached from the frame (by ``Source``);
parameters and buffers of modules become ``get_attr`` nodes and built-in
``torch.nn`` layers ``call_module`` nodes, both owned by the graph's root
module.  Each operation is classified as it is added (``effects.node_effect``):
``before_node`` hears whether it may leave changed state if the graph
raises and whether it may raise at all once traced (``effects.may_raise``;
the tracer's program-order rule may refuse it), and those that may change state
are listed in ``mutations``.  This module knows nothing about bytecode.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
)

from ..errors import GraphBreak
from ..source import Source
from .effects import MUTATES, may_raise, node_effect, storage_of
from .fakes import TraceFakeMode, new_fake, new_meta
from .layouts import storage_length
from .propagation import Propagation
from .shapes import SYMBOLIC, NeedsSymbolicShapes, SymbolicShapes

_FAKE_KEY = torch._C._TorchDispatchModeKey.FAKE


@dataclass
class GraphInput:
    """A placeholder: what feeds it at run time (``source``), the real example and its fake.

    ``fake`` is a fake tensor, or a ``SymInt`` for an int argument made symbolic.
    """

    node: fx.Node
    source: Source
    example: object
    fake: object


class GraphBuilder:
    def __init__(self, symbolic: bool = False):
        self.graph = fx.Graph()
        #: The trace's ShapeEnv work when some input may be symbolic (dynamic shapes), else None.
        self.shapes = SymbolicShapes() if symbolic else None
        self.fake_mode = TraceFakeMode(allow_non_fake_inputs=True, shape_env=self.shapes.env if symbolic else None)
        self.inputs: list[GraphInput] = []
        #: id(input tensor) -> its source's expression; ``inputs`` holds each tensor, so ids stay unique.
        self._input_of_tensor: dict[int, str] = {}
        #: The placeholder inserted last (placeholders are only made by ``_insert_placeholder``).
        self._last_placeholder: fx.Node | None = None
        self._inputs_by_source: dict[str, object] = {}
        self._attr_names: dict[int, str] = {}
        self.attrs: dict[str, object] = {}
        self._fake_cache: dict[int, torch.Tensor] = {}
        #: The real tensors behind ``_fake_cache`` (its keys are their ids, which must stay unique).
        self._faked: list[torch.Tensor] = []
        #: Every non-placeholder node in creation order, so a failed instruction can be rolled back.
        self.created: list[fx.Node] = []
        #: id(fake tensor) -> its value: an op that returns one of its inputs (in-place ops,
        #: ``dropout(training=False)``) gives back *that* value, so identity is kept at run time.
        self._value_of_fake: dict[int, object] = {}
        #: Called before each operation (capture delivers a deferred Ctrl-C there: a point where
        #: no torch code is running and the graph is consistent); None: nothing to do.
        self.before_op = None
        #: Called with whether an operation may leave changed state if the graph raises
        #: (``effects.MUTATES``) before its node is kept; it may raise ``GraphBreak`` (the tracer's
        #: program-order rule).  None: nothing to do.
        self.before_node = None
        #: The ``MUTATES`` nodes created so far (some may have been rolled back since).
        self.mutations: list[fx.Node] = []
        #: Storages of the inputs, parameters and buffers: what an in-place op must not write unseen.
        self.external: set = set()
        #: Results made again from recorded metadata instead of dispatching (``propagation.Propagation``).
        self._propagation = Propagation(self.fake_mode, self._faking)

    def propagating(self):
        """Context manager: the fake mode, active for a whole trace."""
        return self.fake_mode

    # -- inputs -----------------------------------------------------------------
    def input_tensor(self, source: Source, tensor: torch.Tensor, choices=None):
        """The ``TensorValue`` for a tensor reached from the frame by ``source`` (one placeholder per source).

        ``choices`` (``dynamic.DimChoice`` per dim, or None for all static) says which dims are
        symbolic; it needs a builder made ``symbolic``.
        """
        key = source.expr()
        if key in self._inputs_by_source:
            return self._inputs_by_source[key]
        if choices is not None and self.shapes is None:
            raise NeedsSymbolicShapes(key)
        same = self._input_of_tensor.get(id(tensor))
        if same is not None:
            # The same tensor reached two ways: one placeholder (the caller guards the identity).
            return self._inputs_by_source[same]
        name = _node_name(key)
        node = self._insert_placeholder(name)
        fake = self.fake_of(tensor, source, choices)
        node.meta["example_value"] = node.meta["val"] = fake
        self.external.add(storage_of(fake))
        value = _VALUES.TensorValue(node, fake, source, type(tensor))
        self.inputs.append(GraphInput(node, source, tensor, fake))
        self._inputs_by_source[key] = value
        self._input_of_tensor[id(tensor)] = key
        self._value_of_fake[id(fake)] = value
        return value

    def input_symint(self, source: Source, value: int):
        """The ``SymNumberValue`` for an int argument made symbolic (a placeholder fed from ``source``)."""
        key = source.expr()
        if key in self._inputs_by_source:
            return self._inputs_by_source[key]
        if self.shapes is None:
            raise NeedsSymbolicShapes(key)
        node = self._insert_placeholder(_node_name(key))
        sym = self.shapes.symint(value, source)
        node.meta["example_value"] = node.meta["val"] = sym
        result = _VALUES.SymNumberValue(node, sym, source)
        self.inputs.append(GraphInput(node, source, value, sym))
        self._inputs_by_source[key] = result
        return result

    def _insert_placeholder(self, name: str) -> fx.Node:
        # Each placeholder goes right after the last one (before every other node), so the last
        # one in graph order is always the one inserted last: no walk over the graph's nodes.
        anchor = self._last_placeholder
        if anchor is None:
            first = next(iter(self.graph.nodes), None)
            if first is None:
                node = self.graph.placeholder(name)
            else:
                with self.graph.inserting_before(first):
                    node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_after(anchor):
                node = self.graph.placeholder(name)
        self._last_placeholder = node
        return node

    def attr_tensor(self, tensor: torch.Tensor, hint: str, source: Source):
        """A parameter or buffer of a module, held by the graph's root as a ``get_attr`` node."""
        name = self._register_attr(tensor, hint)
        node = self.graph.get_attr(name)
        self.created.append(node)
        fake = self.fake_of(tensor)
        node.meta["example_value"] = fake
        self.external.add(storage_of(fake))
        value = _VALUES.TensorValue(node, fake, source, type(tensor))
        self._value_of_fake.setdefault(id(fake), value)
        return value

    def _register_attr(self, obj, hint: str) -> str:
        if id(obj) in self._attr_names:
            return self._attr_names[id(obj)]
        base = _node_name(hint)
        name, i = base, 1
        while name in self.attrs:
            name, i = f"{base}_{i}", i + 1
        self.attrs[name] = obj
        self._attr_names[id(obj)] = name
        return name

    def fake_of(self, tensor: torch.Tensor, source: Source | None = None, choices=None) -> torch.Tensor:
        """The trace's one fake of ``tensor``: static, or with the symbolic dims ``choices`` asks for
        (``source`` names them in guards) when it is first faked."""
        fake = self._fake_cache.get(id(tensor))
        if fake is None:
            if choices is not None:
                fake = self.shapes.fake_tensor(self.fake_mode, tensor, source, choices)
            else:
                fake = self._plain_fake(tensor)
                if fake is None:
                    fake = self.fake_mode.from_tensor(tensor, static_shapes=True)
            self._fake_cache[id(tensor)] = fake
            self._faked.append(tensor)
        return fake

    def _plain_fake(self, tensor: torch.Tensor) -> FakeTensor | None:
        """The static fake of a plain tensor (a parameter, a buffer, an input) made directly, or None.

        ``from_tensor`` describes every tensor in full (views, storages shared with tensors faked
        before, subclasses, gradients, conjugate bits...), a third of a millisecond each: a model's
        hundreds of parameters spent more there than in the rest of their wrapping.  A dense leaf
        tensor that is the only holder of its storage and has no grad has nothing of that; its fake
        is made as ``from_tensor`` would and registered with the converter, so a later
        ``from_tensor`` of it (fake mode's own conversion of a real argument) finds this one.
        """
        t = type(tensor)
        if (self.shapes is not None or (t is not torch.Tensor and t is not torch.nn.Parameter)
                or tensor.layout is not torch.strided or tensor.device.type not in ("cpu", "cuda")
                or not tensor.is_leaf or tensor._base is not None or tensor.grad is not None
                or tensor.storage_offset() or tensor.is_conj() or tensor.is_neg() or tensor.is_inference()
                or tensor.is_quantized or getattr(tensor, "_is_buffer", False)
                or torch._C._functorch.is_functorch_wrapped_tensor(tensor)):
            return None
        shape, stride = tensor.shape, tensor.stride()
        storage = tensor.untyped_storage()
        if (storage.nbytes() != storage_length(shape, stride) * tensor.element_size()
                or torch._C._storage_Use_Count(storage._cdata) != 2):  # this tensor and ``storage``
            return None
        fake = new_fake(self.fake_mode, new_meta(shape, stride, tensor.dtype, tensor.requires_grad), tensor.device)
        if t is torch.nn.Parameter:
            fake._is_param = True
        self.fake_mode.fake_tensor_converter.set_tensor_memo(tensor, fake)
        return fake

    def example_inputs(self) -> list:
        """What the backend compiles for: the real inputs, or for a symbolic graph their fakes and
        ``SymInt``s (real tensors would make it compile for these sizes only)."""
        symbolic = self.shapes is not None and not self.shapes.is_static()
        return [i.fake if symbolic else i.example for i in self.inputs]

    # -- operations ---------------------------------------------------------------
    def call(self, kind: str, target, args: list, kwargs: dict, what: str):
        """Add a ``call_function`` / ``call_method`` / ``call_module`` node and propagate fake values.

        ``args``/``kwargs`` are ``Value``s (nested containers allowed); ``what``
        names the operation for error messages.
        """
        if self.before_op is not None:
            self.before_op()
        node_args, fake_args = _lower(args, what)
        node_kwargs, fake_kwargs = _lower(kwargs, what)
        if kind == "call_module":
            module = target
            target = self._register_attr(module, what)
        # Arguments set after: ``create_node`` walks them with pytree only to warn of raw ``SymInt``s, which
        # ``_lower`` never leaves (a symbolic value is its node).
        node = self.graph.create_node(kind, target)
        node.args = tuple(node_args)
        if node_kwargs:
            node.kwargs = dict(node_kwargs)
        self.created.append(node)
        try:
            if kind == "call_module":
                call = self._on_fakes(module)
            elif self.shapes is None:
                fake = self._propagation.propagate(kind, target, fake_args, fake_kwargs)
                call = None
            elif kind == "call_function":
                call = target
            else:
                call, fake_args = getattr(fake_args[0], target), fake_args[1:]
            if call is not None:
                fake = self._faking(call, *fake_args, **fake_kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as e:
            self.graph.erase_node(node)
            if self.shapes is None and _captures_data_dependent(e):
                raise NeedsSymbolicShapes(what) from None  # traced again with a ShapeEnv to hold the symbol
            raise GraphBreak(
                f"`{what}` produces a value that depends on tensor data ({type(e).__name__}); "
                "it cannot be captured in a static graph"
                f" (dynacap.config.{_setting_for(e)}=True keeps it in the graph)"
            ) from e
        except GraphBreak:
            self.graph.erase_node(node)
            raise
        except GuardOnDataDependentSymNode:
            self.graph.erase_node(node)
            raise GraphBreak(f"`{what}` needs the value of a number read from tensor data (`.item()`, the size "
                             "of `nonzero` or a mask), known only when the graph runs; it runs eagerly") from None
        except Exception as e:
            self.graph.erase_node(node)
            if "data is not allocated yet" in str(e):
                # A kernel that reads the values of a tensor, which a fake tensor does not have.
                raise GraphBreak(f"`{what}` reads the values of a tensor (its result's shape depends on them); "
                                 "it cannot be captured in a static graph and runs eagerly") from e
            raise GraphBreak(
                f"`{what}` raised {type(e).__name__} while capturing ({_first_line(e)}); it runs eagerly instead"
            ) from e
        if self.shapes is not None:
            bindings = self.shapes.bind_unbacked(fake)
            if bindings:
                node.meta["unbacked_bindings"] = bindings
        mutates = node_effect(node, self.external, module if kind == "call_module" else None, fake) == MUTATES
        if self.before_node is not None:
            try:
                self.before_node(mutates, may_raise(node, self.external))
            except GraphBreak:
                self.graph.erase_node(node)
                raise
        if mutates:
            self.mutations.append(node)
        return self.wrap_result(node, fake)

    def _faking(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` in the fake mode."""
        if torch._C._get_dispatch_mode(_FAKE_KEY) is self.fake_mode:
            return fn(*args, **kwargs)
        with self.fake_mode:  # outside a trace's ``propagating`` block
            return fn(*args, **kwargs)

    def _on_fakes(self, module: torch.nn.Module):
        """``module`` called with fakes of its parameters and buffers: fake mode alone would let it
        write a real 0-dim buffer (``num_batches_tracked``), which it treats as a constant."""
        tensors = dict(module.named_parameters(remove_duplicate=False))
        tensors.update(module.named_buffers(remove_duplicate=False))
        fakes = {name: self.fake_of(t) for name, t in tensors.items() if t is not None}
        return lambda *args, **kwargs: torch.func.functional_call(module, fakes, args, kwargs)

    def holds_mutation(self) -> bool:
        """Whether the graph holds a node that may leave changed state if the graph raises."""
        return any(not getattr(node, "_erased", False) for node in self.mutations)

    def wrap_result(self, node: fx.Node, fake):
        if isinstance(fake, torch.Tensor):
            node.meta["example_value"] = fake
            existing = self._value_of_fake.get(id(fake))
            if existing is not None and existing.fake is fake and not getattr(existing.node, "_erased", False):
                return existing  # the node stays for its effect; the result *is* the earlier tensor
            value = _VALUES.TensorValue(node, fake)
            self._value_of_fake[id(fake)] = value
            return value
        if isinstance(fake, SYMBOLIC):
            node.meta["example_value"] = node.meta["val"] = fake
            return _VALUES.SymNumberValue(node, fake)
        if isinstance(fake, torch.Size):
            if not any(isinstance(d, torch.SymInt) for d in fake):
                self._erase_if_unused(node)
                return _VALUES.SizeValue([_VALUES.ConstantValue(d) for d in fake])
            node.meta["example_value"] = fake
            return _VALUES.SizeValue([self._item(node, i, d) for i, d in enumerate(fake)])
        if isinstance(fake, (tuple, list)) and _holds_tensor(fake):
            node.meta["example_value"] = fake
            items = []
            for i, x in enumerate(fake):
                if isinstance(x, (torch.Tensor, *SYMBOLIC)) or (isinstance(x, (tuple, list)) and _holds_tensor(x)):
                    items.append(self._item(node, i, x))
                elif _VALUES.is_literal(x):
                    items.append(_VALUES.ConstantValue(x))
                else:
                    raise GraphBreak(f"an operation returned a {type(x).__name__} inside a sequence")
            if type(fake) not in (tuple, list) and hasattr(type(fake), "__match_args__"):
                return _VALUES.StructSeqValue(items, type(fake))
            return _VALUES.TupleValue(items)
        if fake is None:
            return _VALUES.ConstantValue(None)
        if _VALUES.is_literal(fake):
            self._erase_if_unused(node)
            return _VALUES.ConstantValue(fake)
        self.graph.erase_node(node)
        raise GraphBreak(f"an operation returned a {type(fake).__name__}, which cannot be captured")

    def _item(self, node: fx.Node, i: int, fake):
        """Item ``i`` of a sequence or size result: a constant dim, or a ``getitem`` node."""
        if isinstance(fake, int):  # a static dim of a size with symbolic ones
            return _VALUES.ConstantValue(fake)
        item = self.graph.call_function(operator.getitem, (node, i))
        self.created.append(item)
        return self.wrap_result(item, fake)

    def _erase_if_unused(self, node: fx.Node) -> None:
        if not node.users:
            self.graph.erase_node(node)

    def set_grad_enabled(self, mode: bool) -> None:
        """Record a grad-mode switch in the graph (the tracer switches the real mode for fake propagation)."""
        self.created.append(self.graph.call_function(torch._C._set_grad_enabled, (mode,)))

    def rollback(self, count: int) -> None:
        """Erase the nodes created after the first ``count`` (those of an instruction that broke)."""
        for node in reversed(self.created[count:]):
            if not getattr(node, "_erased", False):
                self.graph.erase_node(node)
        del self.created[count:]

    # -- finishing ------------------------------------------------------------------
    def op_count(self) -> int:
        """Operations in the graph (grad-mode switches do not count: alone they need no graph)."""
        return sum(1 for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module")
                   and n.target is not torch._C._set_grad_enabled
                   and not isinstance(n.meta.get("example_value"), SYMBOLIC))

    def finish(self, outputs: list[fx.Node]) -> fx.GraphModule:
        """Set the graph's outputs (a tuple) and build the ``GraphModule``."""
        self.graph.output(tuple(outputs))
        # Sizes and relations computed only to be looked at in Python (``if x.size(0) > 8``).
        for node in reversed(list(self.graph.nodes)):
            if not node.users and node.op != "placeholder" and isinstance(node.meta.get("example_value"), SYMBOLIC):
                self.graph.erase_node(node)
        root = torch.nn.Module()
        for name, obj in self.attrs.items():
            if isinstance(obj, torch.nn.Module):
                root.add_module(name, obj)
            elif isinstance(obj, torch.nn.Parameter):
                root.register_parameter(name, obj)
            else:
                root.register_buffer(name, obj)
        gm = fx.GraphModule(root, self.graph)  # generates ``forward`` from the graph (its setter recompiles)
        if self.shapes is not None and self.shapes.unbacked:
            self._insert_runtime_asserts(gm)
            gm.recompile()  # the graph changed since
        return gm

    def _insert_runtime_asserts(self, gm: fx.GraphModule) -> None:
        """What the trace assumed about numbers read from tensor data (``torch._check(n > 0)``, a size
        being >= 0), checked by the graph when it runs: AOTAutograd drops a ``torch._check`` call
        whose result is unused, and the graph would compute on a wrong assumption instead of raising."""
        from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

        for node in gm.graph.nodes:
            if "val" not in node.meta and "example_value" in node.meta:
                node.meta["val"] = node.meta["example_value"]
        insert_deferred_runtime_asserts(gm, self.shapes.env, "dynacap")


def _setting_for(e: Exception) -> str:
    """The setting that keeps ``e``'s kind of data-dependent result in the graph."""
    if isinstance(e, DynamicOutputShapeException):
        return "capture_dynamic_output_shape_ops"
    return "capture_scalar_outputs"


def _captures_data_dependent(e: Exception) -> bool:
    """Whether the settings ask for ``e``'s data-dependent result to be a symbol in the graph."""
    from .. import config

    return getattr(config, _setting_for(e))


def _holds_tensor(fake) -> bool:
    """Whether a (nested) tuple/list result contains a tensor or a symbolic number."""
    return any(isinstance(x, (torch.Tensor, *SYMBOLIC)) or (isinstance(x, (tuple, list)) and _holds_tensor(x))
               for x in fake)


def _lower(values, what: str):
    """Values (nested) to (FX node arguments, fake arguments)."""
    V = _VALUES
    TensorValue, ConstantValue = V.TensorValue, V.ConstantValue
    t = type(values)
    if t is TensorValue:  # the common cases first (subclasses take the general path below)
        return values.node, values.fake
    if t is ConstantValue:
        return values.value, values.value
    if t is list or t is tuple:
        nodes, fakes = [], []
        for v in values:
            node, fake = _lower(v, what)
            nodes.append(node)
            fakes.append(fake)
        return nodes, fakes
    if isinstance(values, dict):
        pairs = {k: _lower(v, what) for k, v in values.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(values, (list, tuple)):
        pairs = [_lower(v, what) for v in values]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(values, (TensorValue, V.SymNumberValue)):
        return values.node, values.fake
    if isinstance(values, V.SymSliceValue):
        nodes, fakes = _lower(values.parts, what)
        return slice(*nodes), slice(*fakes)
    if isinstance(values, ConstantValue) or (isinstance(values, V.Value) and values.is_constant()
                                             and not isinstance(values, V.SequenceValue)):
        v = values.as_constant()
        return v, v
    if isinstance(values, V.SequenceValue):
        node, fake = _lower(values.items, what)
        t = values.container_type
        if t is torch.Size and any(isinstance(n, fx.Node) for n in node):
            return tuple(node), t(fake)  # a size holding symbols: FX takes it as a tuple of nodes and ints
        return t(node), t(fake)
    if isinstance(values, V.DictValue):
        return _lower(values.items, what)
    if isinstance(values, V.Value):
        raise GraphBreak(f"`{what}` was given {values.describe()}, which cannot be an argument of a graph operation")
    return values, values


#: Runs of characters that are not ASCII letters or digits (``str.isalnum`` on ASCII text).
_NOT_ALNUM_RUNS = re.compile(r"[^0-9A-Za-z]+")


class _ValueKinds:
    """The value classes the builder makes and tells apart, bound on first use: the values import this
    module, and an import inside a function costs a microsecond per call (on every operation of a trace)."""

    _NAMES = ("Value", "ConstantValue", "is_literal", "DictValue", "SequenceValue", "SizeValue", "StructSeqValue",
              "TupleValue", "SymNumberValue", "SymSliceValue", "TensorValue")

    def __getattr__(self, name: str):
        from ..values import base, constant, containers, symbolic, tensor

        for module in (base, constant, containers, symbolic, tensor):
            self.__dict__.update({n: getattr(module, n) for n in self._NAMES if hasattr(module, n)})
        return self.__dict__[name]


_VALUES = _ValueKinds()


def _node_name(text: str) -> str:
    """``text`` as a node name: its letters and digits, each run of anything else one ``_`` between them."""
    if text.isascii():  # every source expression in practice: one regex pass
        out = _NOT_ALNUM_RUNS.sub("_", text).strip("_")
    else:
        out = "_".join(p for p in "".join(c if c.isalnum() else "_" for c in text).split("_") if p)
    if not out or out[0].isdigit():
        out = "v_" + out
    return out


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__
