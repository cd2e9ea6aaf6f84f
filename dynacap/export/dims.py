"""``dynamic_shapes`` of ``torch.export``, as dynacap's dim marks; the program's range constraints.

``torch.export.Dim`` specs say which input dims are symbolic and their
ranges.  ``mark_inputs`` maps them onto ``dynacap.mark_dynamic`` (strict:
specializing such a dim is an error) on *aliases* of the user's tensors, so
the user's tensors keep no marks; every other dim of every input is marked
static, so what the automatic-dynamic record learned from earlier runs
does not leak into the export.  ``Dim.AUTO``/``Dim.DYNAMIC`` are
``maybe_mark_dynamic`` (the code may specialize them).
``range_constraints`` reads each input symbol's range from the trace's
ShapeEnv, reporting a ``Dim``'s own lower bound where the ShapeEnv only
added its 0/1 specialization (as ``torch.export`` does).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

from ..dynamic import mark_dynamic, mark_static, maybe_mark_dynamic


@dataclass
class DimMarks:
    """What ``mark_inputs`` did: the aliases given to the capture and the ``Dim`` of each marked dim."""

    args: tuple
    kwargs: dict
    #: id(alias tensor) -> {dim index: torch.export.Dim}
    dims: dict = field(default_factory=dict)


def bound_names(signature: inspect.Signature | None, args: tuple, kwargs: dict) -> list[str]:
    """The argument names ``args``/``kwargs`` bind to (positional first), as ``dynamic_shapes`` keys them."""
    if signature is None:
        return [f"arg{i}" for i in range(len(args))] + list(kwargs)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return [f"arg{i}" for i in range(len(args))] + list(kwargs)
    names = []
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            names.extend(f"{name}_{i}" for i in range(len(value)))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            names.extend(value)
        else:
            names.append(name)
    return names


def mark_inputs(args: tuple, kwargs: dict, dynamic_shapes, names: list[str]) -> DimMarks:
    """Aliases of every input tensor, marked as ``dynamic_shapes`` says (the rest static)."""
    values = list(args) + list(kwargs.values())
    specs = _specs_by_position(dynamic_shapes, names, len(values))
    marks = DimMarks((), {})
    aliased = [_alias_tree(v, s, marks) for v, s in zip(values, specs)]
    marks.args = tuple(aliased[: len(args)])
    marks.kwargs = dict(zip(kwargs, aliased[len(args):]))
    return marks


def _specs_by_position(dynamic_shapes, names: list[str], count: int) -> list:
    if isinstance(dynamic_shapes, dict):
        unknown = set(dynamic_shapes) - set(names)
        if unknown:
            raise ValueError(f"dynamic_shapes names {sorted(unknown)}, which are not arguments ({names})")
        return [dynamic_shapes.get(n) for n in names]
    specs = list(dynamic_shapes)
    if len(specs) > count:
        raise ValueError(f"dynamic_shapes has {len(specs)} entries for {count} arguments")
    return specs + [None] * (count - len(specs))


def _alias_tree(value, spec, marks: DimMarks):
    if isinstance(value, torch.Tensor):
        return _alias(value, spec, marks)
    if spec is None:
        return pytree.tree_map(lambda v: _alias(v, None, marks) if isinstance(v, torch.Tensor) else v, value)
    if isinstance(value, dict) and isinstance(spec, dict):
        return type(value)((k, _alias_tree(v, spec.get(k), marks)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)) and len(spec) == len(value):
        items = [_alias_tree(v, s, marks) for v, s in zip(value, spec)]
        return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)
    raise ValueError(f"dynamic_shapes entry {spec!r} does not match the structure of its input")


def _alias(t: torch.Tensor, spec, marks: DimMarks) -> torch.Tensor:
    """A new tensor object on ``t``'s storage (marks are attributes of the object), marked per ``spec``."""
    alias = t.detach()
    if t.requires_grad and t.is_leaf:
        alias.requires_grad_(True)
    per_dim = _per_dim(spec, t.dim())
    dims = {}
    for d in range(t.dim()):
        dim = per_dim.get(d)
        hint = dim.type.name if type(dim).__name__ == "_DimHint" else None
        if hint in ("AUTO", "DYNAMIC"):
            maybe_mark_dynamic(alias, d)
        elif dim is None or hint == "STATIC":
            mark_static(alias, d)
        elif isinstance(dim, int):
            if t.shape[d] != dim:
                raise ValueError(f"dynamic_shapes gives dim {d} the size {dim}, but the input has {t.shape[d]}")
            mark_static(alias, d)
        elif type(dim).__name__ == "_DerivedDim":
            raise NotImplementedError(f"derived dims ({dim.__name__}) are not supported by dynacap.export yet")
        else:
            low, high = dim.min, dim.max
            mark_dynamic(alias, d, min=low, max=None if high is None or high > 2 ** 62 else high)
            dims[d] = dim
    if dims:
        marks.dims[id(alias)] = dims
    return alias


def _per_dim(spec, rank: int) -> dict:
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {d % rank: v for d, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return dict(enumerate(spec))
    raise ValueError(f"a tensor's dynamic_shapes entry must be a dict or a tuple of dims, not {spec!r}")


def range_constraints(placeholder_values, marks: DimMarks | None, alias_of_placeholder: dict) -> dict:
    """``{symbol: ValueRanges}`` for every size symbol of the program's input placeholders.

    ``alias_of_placeholder``: placeholder index -> the input alias that fed it (for its ``Dim``).
    """
    from torch.utils._sympy.value_ranges import ValueRanges

    out = {}
    for i, val in enumerate(placeholder_values):
        if not isinstance(val, torch.Tensor):
            continue
        env = getattr(getattr(val, "fake_mode", None), "shape_env", None)
        if env is None:
            continue
        dims = {}
        if marks is not None and i in alias_of_placeholder:
            dims = marks.dims.get(id(alias_of_placeholder[i]), {})
        for d, size in enumerate(val.shape):
            if not isinstance(size, torch.SymInt):
                continue
            expr = size.node.expr
            for sym in expr.free_symbols:
                vr = env.var_to_range.get(sym)
                if vr is None:
                    continue
                dim = dims.get(d)
                if dim is not None and expr == sym and int(vr.lower) == 2 and dim.min < 2:
                    vr = ValueRanges(dim.min, vr.upper)
                out.setdefault(sym, vr)
    return out
