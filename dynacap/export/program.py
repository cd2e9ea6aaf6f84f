"""Building a ``torch.export.ExportedProgram`` around a lowered capture.

The ATen graph of ``lower.py`` takes the captured graph's state, then its
inputs, in capture order.  An ``ExportedProgram`` takes, in this order, the
root module's parameters (``p_<fqn>``), buffers (``b_<fqn>``, non-persistent
ones among the constants), lifted tensor constants (``c_<name>``), then
every leaf of the flattened ``(args, kwargs)`` (named after the arguments),
and returns the leaves of the result.  ``build_program`` matches the
capture's placeholders to those by identity (a parameter of the root, a
user argument, else a tensor the code read from elsewhere: a constant),
rebuilds the graph in that order, runs ``passes.py`` and writes the
signature, module call graph and range constraints.  Tensor ``get_attr`` nodes left by lowering
(tensors made inside the program) are lifted as constants too
(``lifted_tensor_N``, as ``torch.export`` names them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ..errors import BreakReason
from . import passes
from .dims import DimMarks, range_constraints
from .errors import ExportError
from .trace import Captured


@dataclass
class _Inputs:
    """The program's placeholders being built: their specs, the constants, and what each stands for."""

    specs: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)
    #: id(tensor) -> placeholder node (state and constants are lifted once however often they are read).
    by_tensor: dict = field(default_factory=dict)


def _placeholder(graph: fx.Graph, name: str, val, real=None) -> fx.Node:
    """A placeholder whose fake ``val`` says whether ``real`` (the tensor it stands for) requires grad."""
    node = graph.placeholder(_identifier(name))
    if isinstance(real, torch.Tensor) and isinstance(val, torch.Tensor) and val.requires_grad != real.requires_grad \
            and val.is_leaf:
        val.requires_grad_(real.requires_grad)
    node.meta["val"] = val
    return node


def _identifier(text: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in text)
    return out if out and not out[0].isdigit() else "_" + out


def _fake_like(fake_mode, value):
    if not isinstance(value, torch.Tensor):
        return value
    if fake_mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        fake_mode = FakeTensorMode()
    return fake_mode.from_tensor(value, static_shapes=True)


def build_program(captured: Captured, root: torch.nn.Module, args: tuple, kwargs: dict,
                  arg_names: list[str], marks: DimMarks | None, submodules: list[str], example_inputs: tuple):
    """The program of ``captured``; ``args``/``kwargs`` are what the capture ran with (matched by identity),
    ``example_inputs`` the user's own ``(args, kwargs)`` (aliases carry dim marks, which do not pickle)."""
    from torch._export.verifier import TrainingIRVerifier
    from torch._guards import detect_fake_mode
    from torch.export import ExportedProgram
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.export.graph_signature import (
        ConstantArgument,
        ExportGraphSignature,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )

    agm = captured.lowered.gm
    old = [n for n in agm.graph.nodes if n.op == "placeholder"]
    n_state = len(captured.lowered.state)
    fake_mode = detect_fake_mode([n.meta.get("val") for n in old])
    graph = fx.Graph()
    inputs = _Inputs()
    val_map: dict = {}

    # 1. the root's state, all of it (so the program's state_dict is the module's)
    params = dict(root.named_parameters())
    buffers = dict(root.named_buffers())
    non_persistent = {f"{prefix}.{name}" if prefix else name
                      for prefix, m in root.named_modules() for name in m._non_persistent_buffers_set}
    state_of = {id(t): ph for ph, t in zip(old[:n_state], captured.lowered.state)}
    state_dict = {}
    for kind, prefix, table in ((InputKind.PARAMETER, "p_", params), (InputKind.BUFFER, "b_", buffers)):
        for fqn, tensor in table.items():
            source = state_of.get(id(tensor))
            val = source.meta["val"] if source is not None else _fake_like(fake_mode, tensor)
            node = _placeholder(graph, prefix + fqn.replace(".", "_"), val, tensor)
            persistent = None if kind is InputKind.PARAMETER else fqn not in non_persistent
            inputs.specs.append(InputSpec(kind, TensorArgument(node.name), fqn, persistent=persistent))
            if persistent is False:
                inputs.constants[fqn] = tensor
            else:
                state_dict[fqn] = tensor
            inputs.by_tensor[id(tensor)] = node

    # 2. tensors the code read from elsewhere (not the root's state, not an argument): constants
    flat, in_spec = pytree.tree_flatten_with_path((tuple(args), dict(kwargs)))
    leaf_index = {}
    for i, (_, leaf) in enumerate(flat):
        if isinstance(leaf, torch.Tensor):
            leaf_index.setdefault(id(leaf), i)
    runtime = list(captured.lowered.state) + list(captured.graph_inputs)
    if len(runtime) != len(old):
        raise ExportError([BreakReason("the captured graph never ran, so its inputs cannot be matched "
                                       "to the arguments")])

    def lift_constant(tensor: torch.Tensor, val) -> fx.Node:
        node = inputs.by_tensor.get(id(tensor))
        if node is None:
            target = f"lifted_tensor_{sum(s.kind is InputKind.CONSTANT_TENSOR for s in inputs.specs)}"
            node = _placeholder(graph, "c_" + target, val, tensor)
            inputs.specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(node.name), target))
            inputs.constants[target] = tensor
            inputs.by_tensor[id(tensor)] = node
        return node

    hidden = _tensors_inside_objects([leaf for _, leaf in flat])
    for ph, value in zip(old, runtime):
        if isinstance(value, torch.Tensor) and id(value) in inputs.by_tensor:
            val_map[ph] = inputs.by_tensor[id(value)]
        elif isinstance(value, torch.Tensor) and id(value) in leaf_index:
            continue  # a user input: placed below
        elif isinstance(value, torch.Tensor) and id(value) in hidden:
            raise ExportError([BreakReason(
                f"an input tensor is held by a {hidden[id(value)]} argument, which torch's pytree cannot "
                "flatten: the program would keep this call's tensor as a constant (register the class with "
                "torch.utils._pytree.register_pytree_node, or pass the tensor itself)")])
        elif isinstance(value, torch.Tensor):
            val_map[ph] = lift_constant(value, ph.meta.get("val"))
        else:
            raise ExportError([BreakReason(f"the graph takes {type(value).__name__} {value!r} that is not an "
                                           "argument; dynacap.export cannot lift it")])
    for node in agm.graph.nodes:  # tensors made inside the program, held by the lowered graph
        if node.op == "get_attr" and isinstance(getattr(agm, node.target, None), torch.Tensor):
            tensor = getattr(agm, node.target)
            val_map[node] = lift_constant(tensor, _fake_like(fake_mode, tensor))

    # 3. the user's inputs, every leaf of (args, kwargs)
    user_nodes = []
    alias_of_placeholder = {}
    for i, (path, leaf) in enumerate(flat):
        name = _leaf_name(arg_names, path)
        if isinstance(leaf, torch.Tensor):
            source = next((ph for ph, v in zip(old, runtime) if v is leaf), None)
            val = source.meta["val"] if source is not None else _fake_like(fake_mode, leaf)
            node = _placeholder(graph, name, val, leaf)
            if source is not None:
                val_map[source] = node
            inputs.specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None))
            alias_of_placeholder[len(inputs.specs) - 1] = leaf
        else:
            node = _placeholder(graph, name, leaf)
            inputs.specs.append(InputSpec(InputKind.USER_INPUT, ConstantArgument(node.name, leaf), None))
        user_nodes.append(node)

    # 4. the operations, then the result's leaves
    mapped = graph.graph_copy(agm.graph, val_map)
    graph_outputs = dict(zip((id(t) for t in captured.graph_outputs), mapped))
    out_leaves, out_spec = pytree.tree_flatten(captured.result)
    outputs, out_specs = [], []
    for leaf in out_leaves:
        if isinstance(leaf, torch.Tensor):
            node = graph_outputs.get(id(leaf))
            if node is None and id(leaf) in leaf_index:
                node = user_nodes[leaf_index[id(leaf)]]
            if node is None:
                node = inputs.by_tensor.get(id(leaf))
            if node is None:
                raise ExportError([BreakReason("the program returns a tensor that is neither computed by the "
                                               "graph nor an input; dynacap.export cannot express it")])
            outputs.append(node)
            out_specs.append(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(node.name), None))
        else:
            outputs.append(leaf)
            out_specs.append(OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", leaf), None))
    graph.output(tuple(outputs))
    graph.eliminate_dead_code(is_impure_node=lambda n: n.op == "placeholder" or n.is_impure())
    graph.lint()

    gm = fx.GraphModule(torch.nn.Module(), graph)
    gm, graph_signature = passes.run_all(gm, ExportGraphSignature(inputs.specs, out_specs),
                                         getattr(fake_mode, "shape_env", None))
    placeholder_vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    signature = ModuleCallSignature([], [], in_spec, out_spec, forward_arg_names=list(arg_names))
    call_graph = [ModuleCallEntry("", signature)] + [ModuleCallEntry(fqn, None) for fqn in submodules]
    return ExportedProgram(
        root=gm, graph=gm.graph,
        graph_signature=graph_signature,
        state_dict=state_dict,
        range_constraints=range_constraints(placeholder_vals, marks, alias_of_placeholder),
        module_call_graph=call_graph,
        example_inputs=example_inputs,
        constants=inputs.constants,
        verifiers=[TrainingIRVerifier],
    )


def _tensors_inside_objects(leaves, depth: int = 3) -> dict:
    """id -> holder type name, for tensors reachable through the attributes of non-tensor argument leaves."""
    found: dict = {}

    def visit(obj, holder: str, level: int) -> None:
        if isinstance(obj, torch.Tensor):
            found.setdefault(id(obj), holder)
        elif level < depth and isinstance(obj, (list, tuple, set, frozenset)):
            for item in obj:
                visit(item, holder, level + 1)
        elif level < depth and isinstance(obj, dict):
            for item in obj.values():
                visit(item, holder, level + 1)
        elif level < depth and isinstance(getattr(obj, "__dict__", None), dict):
            for item in vars(obj).values():
                visit(item, holder, level + 1)

    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            visit(leaf, type(leaf).__name__, 0)
    return found


def _leaf_name(arg_names: list[str], path) -> str:
    """A user input's placeholder name: its argument's name, then the path into it (``xs_0``, ``d_key``)."""
    (top, *rest) = path[1:]  # path[0] picks args or kwargs
    base = arg_names[top.idx] if hasattr(top, "idx") and top.idx < len(arg_names) else str(getattr(top, "key", top))
    parts = [base]
    for key in rest:
        parts.append(str(getattr(key, "idx", getattr(key, "key", getattr(key, "name", key)))))
    return "_".join(parts)
