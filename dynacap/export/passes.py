"""The passes ``torch.export`` runs after tracing, run on dynacap's program before it is sealed.

``program.py`` already does the ones that need capture's knowledge:
parameters, buffers (non-persistent ones as constants) and tensors made or
read by the program lifted into placeholders named ``p_``/``b_``/``c_`` and
after the arguments.  What is left, in ``torch.export``'s order
(``_produce_aten_artifact``):

1. runtime asserts: the ShapeEnv's deferred asserts (``torch._check`` on
   sizes, ranges the code relied on) become ``_assert_scalar`` nodes, and a
   dtype conversion asserts its input's metadata, as in ``torch.export``;
2. ``no_grad``/``enable_grad`` regions and ``autocast`` blocks (pairs of
   mode-switch nodes in the lowered graph) become the higher-order ops
   ``wrap_with_set_grad_enabled`` / ``wrap_with_autocast`` over submodules;
3. placeholders and outputs carry no ``nn_module_stack``/``stack_trace``.

Each pass takes and returns ``(GraphModule, ExportGraphSignature)``.  They
use torch's own pass implementations where those stand alone.
"""
from __future__ import annotations

import torch
import torch.fx as fx


def run_all(gm: fx.GraphModule, signature, shape_env):
    gm, signature = runtime_asserts(gm, signature, shape_env)
    gm, signature = mode_regions_as_hops(gm, signature)
    strip_input_metadata(gm)
    return gm, signature


def runtime_asserts(gm: fx.GraphModule, signature, shape_env):
    """Deferred runtime asserts of the trace's ShapeEnv, and metadata asserts on ``aten.to``, as graph nodes."""
    from torch._export.utils import _insert_aten_to_metadata_assert_pass
    from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

    if shape_env is not None:
        insert_deferred_runtime_asserts(gm, shape_env, "exported program", export=True)
    _insert_aten_to_metadata_assert_pass(gm)
    gm.recompile()
    return gm, _with_output_names(gm, signature)


def mode_regions_as_hops(gm: fx.GraphModule, signature):
    """Grad-mode and autocast regions as higher-order ops (what the training IR verifier expects)."""
    from torch._export.passes.replace_autocast_with_hop_pass import replace_autocast_with_hop_pass
    from torch._export.passes.replace_set_grad_with_hop_pass import replace_set_grad_with_hop_pass

    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    if torch._C._set_grad_enabled in targets:
        gm, signature = replace_set_grad_with_hop_pass(gm, signature)
    if torch.amp.autocast_mode._enter_autocast in targets:
        gm, signature = replace_autocast_with_hop_pass(gm, signature)
    return gm, signature


def strip_input_metadata(gm: fx.GraphModule) -> None:
    """Placeholders and outputs have no module stack or stack trace (as in ``torch.export``)."""
    for module in gm.modules():
        if isinstance(module, fx.GraphModule):
            for node in module.graph.nodes:
                if node.op in ("placeholder", "output"):
                    node.meta.pop("nn_module_stack", None)
                    node.meta.pop("stack_trace", None)


def _with_output_names(gm: fx.GraphModule, signature):
    """The signature with its tensor outputs renamed after the graph's (a pass may have replaced them)."""
    from torch.export.graph_signature import TensorArgument

    outputs = gm.graph.output_node().args[0]
    for spec, node in zip(signature.output_specs, outputs):
        if isinstance(spec.arg, TensorArgument) and isinstance(node, fx.Node):
            spec.arg = TensorArgument(node.name)
    return signature
