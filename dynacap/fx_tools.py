"""FX tools on captured graphs: shapes, FLOP counts, conv–BN folding, drawings.

Captured graphs carry the fake value of every node (``example_value``, or
``val`` for inputs): the shapes the trace propagated, with symbols for
dynamic sizes.  ``node_shape`` writes them as ``f32[2, 3]``; ``flop_count``
runs the graph on those fakes under ``torch.utils.flop_counter`` (no real
computation, nothing mutated); ``fold_conv_bn`` folds inference-mode batch
norms into the convolution before them (torch-level graphs as captured,
and ATen graphs as exported); ``graph_svg`` draws a graph as SVG, laid out
by depth, with no dependency outside the standard library.  These read
graphs and build new ones; they never change a graph in a cache entry.
"""
from __future__ import annotations

import html
import operator

import torch
import torch.fx as fx

_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
           torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
           torch.bool: "b8", torch.complex64: "c64", torch.complex128: "c128"}


def node_value(node: fx.Node):
    return node.meta.get("val", node.meta.get("example_value"))


def node_shape(node: fx.Node) -> str:
    """The node's propagated value as ``f32[2, 3]`` (tuples as ``(f32[2], i64[])``, numbers as ``Sym(s0)``)."""
    return _describe(node_value(node))


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{_DTYPES.get(value.dtype, str(value.dtype).replace('torch.', ''))}[{', '.join(map(str, value.shape))}]"
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return f"Sym({value})"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return "" if value is None else type(value).__name__


def _fake_inputs(gm: fx.GraphModule):
    from torch._guards import detect_fake_mode

    values = [node_value(n) for n in gm.graph.nodes if n.op == "placeholder"]
    return values, detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])


def flop_count(gm: fx.GraphModule):
    """FLOPs of one run of ``gm`` at its captured shapes (an int; a sympy expression for symbolic sizes)."""
    from torch.utils.flop_counter import FlopCounterMode

    values, fake_mode = _fake_inputs(gm)
    if fake_mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    counter = FlopCounterMode(display=False)
    grad = torch.is_grad_enabled()
    allowed = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True  # parameters held by the graph stay real (read, never written)
    try:
        with fake_mode, counter:
            gm(*values)
    finally:
        fake_mode.allow_non_fake_inputs = allowed
        torch._C._set_grad_enabled(grad)  # a graph may hold grad-mode switches
    return counter.get_total_flops()


# -- conv-BN folding ------------------------------------------------------------------------
_CONVS = {torch.conv1d, torch.conv2d, torch.conv3d, torch.nn.functional.conv1d, torch.nn.functional.conv2d,
          torch.nn.functional.conv3d, torch.ops.aten.conv1d.default, torch.ops.aten.conv2d.default,
          torch.ops.aten.conv3d.default}
_BATCH_NORMS = {torch.nn.functional.batch_norm, torch.batch_norm, torch.ops.aten.batch_norm.default}


def fold_conv_bn(gm: fx.GraphModule, inputs=None) -> tuple[fx.GraphModule, int]:
    """A copy of ``gm`` with each inference batch norm after a convolution folded into it; and how many.

    Folded: ``batch_norm(conv(x, w, b, ...), mean, var, gamma, beta, training=False, _, eps)``
    where the conv's only user is the batch norm, and its weight, bias and the norm's tensors are
    ``get_attr`` tensors or graph inputs whose values ``inputs`` gives (the graph's example inputs,
    in placeholder order: captured graphs take parameters as inputs).  Folding bakes those values in:
    the folded graph keeps its signature but ignores those inputs, as inference with fixed weights
    may.  The new weight and bias are new tensors: ``gm``'s are not touched.
    """
    from torch.nn.utils.fusion import fuse_conv_bn_weights

    folded_gm = fx.GraphModule(gm, _copy_graph(gm.graph))
    graph = folded_gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    known = {n: v for n, v in zip(placeholders, inputs or ()) if isinstance(v, torch.Tensor)}
    folded = 0
    for bn in list(graph.nodes):
        if bn.op != "call_function" or bn.target not in _BATCH_NORMS:
            continue
        parts = _batch_norm_parts(bn)
        if parts is None:
            continue
        conv, mean, var, gamma, beta, eps = parts
        if conv.op != "call_function" or conv.target not in _CONVS or len(conv.users) != 1:
            continue
        weight = conv.args[1] if len(conv.args) > 1 else conv.kwargs.get("weight")
        bias = conv.args[2] if len(conv.args) > 2 else conv.kwargs.get("bias")
        tensors = [_attr(folded_gm, n, known) for n in (weight, bias, mean, var, gamma, beta)]
        if any(t is None and n is not None for t, n in zip(tensors, (weight, bias, mean, var, gamma, beta))) \
                or tensors[0] is None or tensors[2] is None or tensors[3] is None:
            continue
        w, b, rm, rv, g, bt = tensors
        with torch.no_grad():
            new_w, new_b = fuse_conv_bn_weights(w, b, rm, rv, eps, g, bt)
        new_w.requires_grad_(False)
        new_b.requires_grad_(False)
        name = f"_folded_{folded}"
        folded_gm.register_buffer(name + "_weight", new_w.detach())
        folded_gm.register_buffer(name + "_bias", new_b.detach())
        with graph.inserting_before(conv):
            w_node = graph.get_attr(name + "_weight")
            b_node = graph.get_attr(name + "_bias")
        args = list(conv.args) + [None] * max(0, 3 - len(conv.args))
        args[1], args[2] = w_node, b_node
        conv.args = tuple(args)
        conv.kwargs = {k: v for k, v in conv.kwargs.items() if k not in ("weight", "bias")}
        bn.replace_all_uses_with(conv)
        graph.erase_node(bn)
        folded += 1
    graph.eliminate_dead_code()
    folded_gm.delete_all_unused_submodules()
    folded_gm.recompile()
    return folded_gm, folded


def _copy_graph(graph: fx.Graph) -> fx.Graph:
    """A copy of ``graph`` with its code generator (an exported module's flattens its inputs and outputs)."""
    new = fx.Graph()
    output = new.graph_copy(graph, {})
    new.output(output)
    new._codegen = graph._codegen
    return new


def _batch_norm_parts(bn: fx.Node):
    """(input, mean, var, weight, bias, eps) of an inference batch norm call, else None."""
    names = ["input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"]
    values = dict(zip(names, bn.args))
    values.update(bn.kwargs)
    if bn.target is torch.ops.aten.batch_norm.default or bn.target is torch.batch_norm:
        # aten order: input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn
        aten = ["input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps"]
        values = dict(zip(aten, bn.args))
    if values.get("training", False) or not isinstance(values.get("eps", 1e-5), float):
        return None
    return (values["input"], values.get("running_mean"), values.get("running_var"), values.get("weight"),
            values.get("bias"), values.get("eps", 1e-5))


def _attr(gm: fx.GraphModule, node, known: dict):
    """The tensor a ``get_attr`` node reads, or the known value of an input; else None."""
    if isinstance(node, fx.Node) and node in known:
        return known[node]
    if not isinstance(node, fx.Node) or node.op != "get_attr":
        return None
    value = gm
    for part in node.target.split("."):
        value = getattr(value, part, None)
    return value if isinstance(value, torch.Tensor) else None


# -- drawing --------------------------------------------------------------------------------
_COLORS = {"placeholder": "#dbeafe", "get_attr": "#f3f4f6", "call_function": "#dcfce7", "call_method": "#fef9c3",
           "call_module": "#fde68a", "output": "#fee2e2"}


def node_label(node: fx.Node) -> str:
    if node.op in ("placeholder", "output", "get_attr"):
        what = node.op if node.op != "get_attr" else f"get_attr {node.target}"
    elif node.op == "call_function":
        what = getattr(node.target, "__name__", str(node.target)) if node.target is not operator.getitem else "getitem"
    else:
        what = f"{node.op.replace('call_', '')} {node.target}"
    return what


def graph_svg(gm: fx.GraphModule, title: str = "") -> str:
    """An SVG drawing of ``gm``: one box per node (name, operation, shape), an arrow per use, top to bottom."""
    nodes = list(gm.graph.nodes)
    depth: dict[fx.Node, int] = {}
    for node in nodes:
        inputs = [n for n in node.all_input_nodes if n in depth]
        depth[node] = 1 + max((depth[n] for n in inputs), default=-1)
    rows: dict[int, list[fx.Node]] = {}
    for node in nodes:
        rows.setdefault(depth[node], []).append(node)
    box_w, box_h, gap_x, gap_y, top = 190, 46, 20, 34, 30 if title else 10
    width = max(len(r) for r in rows.values()) * (box_w + gap_x) + gap_x
    where = {}
    for d, row in rows.items():
        offset = (width - len(row) * (box_w + gap_x) + gap_x) / 2
        for k, node in enumerate(row):
            where[node] = (offset + k * (box_w + gap_x), top + d * (box_h + gap_y))
    height = top + len(rows) * (box_h + gap_y)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'font-family="monospace" font-size="11">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
             'orient="auto"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>']
    if title:
        parts.append(f'<text x="10" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>')
    for node in nodes:
        x, y = where[node]
        for user in node.users:
            ux, uy = where[user]
            parts.append(f'<line class="edge" x1="{x + box_w / 2:.0f}" y1="{y + box_h:.0f}" x2="{ux + box_w / 2:.0f}" '
                         f'y2="{uy:.0f}" stroke="#555" marker-end="url(#arrow)"/>')
    for node in nodes:
        x, y = where[node]
        shape = node_shape(node)
        parts.append(f'<g class="node"><title>{html.escape(node.format_node() or node.name)}</title>'
                     f'<rect x="{x:.0f}" y="{y:.0f}" width="{box_w}" height="{box_h}" rx="6" '
                     f'fill="{_COLORS.get(node.op, "#fff")}" stroke="#333"/>'
                     f'<text x="{x + 6:.0f}" y="{y + 14:.0f}" font-weight="bold">{html.escape(_clip(node.name))}</text>'
                     f'<text x="{x + 6:.0f}" y="{y + 27:.0f}">{html.escape(_clip(node_label(node)))}</text>'
                     f'<text x="{x + 6:.0f}" y="{y + 40:.0f}" fill="#555">{html.escape(_clip(shape))}</text></g>')
    parts.append("</svg>")
    return "\n".join(parts)


def _clip(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
