"""Which sizes and ints of a frame's inputs are symbolic: marks, ``dynamic=``, automatic dynamic.

``ShapePolicy`` answers, for each tensor or int the tracer wraps from a
source, whether it is static (guarded by value, as with static shapes) or
symbolic (a ``SymInt`` in the graph, guarded by the relations the trace
relied on).  Its answer comes from, strongest first:

1. marks on the tensor object: ``mark_static`` > ``mark_dynamic`` (with an
   optional range, enforced) > ``maybe_mark_dynamic``.  They are the same
   attributes torch.compile's own ``mark_dynamic`` sets, so a tensor
   marked for either compiler is marked for both;
2. ``dynamic=True``: every dim (and int argument) symbolic from the first
   capture; ``dynamic=False``: everything static, marks included;
3. ``dynamic=None`` (the default), *automatic dynamic*: the first capture of
   a code object is static; each capture records the sizes (and ints) it saw
   per input source, and a later capture makes symbolic exactly the dims and
   ints that have differed between them.  So the second size recompiles into
   a symbolic entry, and a third size hits it.

The values of a small integer tensor that a kernel needs at capture time
(``values.known_values``: the lengths of packed sequences) follow the same
rule: the first capture reads them (guarded on them); once a later capture
has seen other values for the source, they are not read again (the kernel
runs eagerly), so changing values recompile once, not on every call.

Sizes 0 and 1 stay specialized even when asked symbolic (torch's ShapeEnv
does that; the guard keeps them exact).  This module decides only; the
ShapeEnv work (symbols, fakes, guards) is ``graph/shapes.py``.  It must not
import the interpreter, values or graph.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

#: A dim or int that has differed between captures (or is forced symbolic).
DYNAMIC = "dynamic"


@dataclass(frozen=True)
class DimRange:
    """The range a ``mark_dynamic`` call gave one dim (the attributes torch's marks use)."""

    dim: int
    min: int | None
    max: int | None


def _indices(t, attr: str) -> set:
    # ``__dict__`` rather than ``getattr``: a tensor subclass's own attribute hooks are user code.
    return t.__dict__.get(attr) or set()


def _dims(t, index) -> list[int]:
    dims = list(index) if isinstance(index, (list, tuple)) else [index]
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise IndexError(f"dim {d!r} is out of range for a tensor of {t.dim()} dims")
    return [d % t.dim() for d in dims]


def mark_dynamic(t, index, *, min: int | None = None, max: int | None = None) -> None:
    """Make dim ``index`` (an int or a list) of tensor ``t`` symbolic from the first capture.

    If the captured code specializes the dim to a constant (``if x.size(0) == 8``), capture
    raises instead of silently compiling a static graph; ``min``/``max`` bound the sizes the
    graph accepts (checked by its guard).
    """
    for d in _dims(t, index):
        t.__dict__.setdefault("_dynamo_dynamic_indices", set()).add(d)
        t.__dict__.setdefault("_dynamo_dynamic_range", set()).add(DimRange(d, min, max))


def maybe_mark_dynamic(t, index) -> None:
    """Like ``mark_dynamic``, but capture may still specialize the dim without an error."""
    for d in _dims(t, index):
        t.__dict__.setdefault("_dynamo_weak_dynamic_indices", set()).add(d)


def mark_static(t, index) -> None:
    """Keep dim ``index`` of ``t`` static (guarded by value), even under automatic dynamic or ``dynamic=True``."""
    for d in _dims(t, index):
        t.__dict__.setdefault("_dynamo_static_indices", set()).add(d)


@dataclass(frozen=True)
class DimChoice:
    """How one dim of a tensor input is captured: symbolic or not, and the mark's range if any."""

    symbolic: bool
    #: A ``mark_dynamic`` dim: specializing it is an error.  ``min``/``max``: its range.
    strict: bool = False
    min: int | None = None
    max: int | None = None


_STATIC = DimChoice(False)
_AUTO = DimChoice(True)

#: id(code) -> (weak reference to the code, {source expression: sizes seen or int seen}).  The sizes are a
#: tuple of ints and ``DYNAMIC``s (or ``DYNAMIC`` when the rank changed); an int is an int or ``DYNAMIC``.
#: By identity, as code objects compare equal by value.  Cleared by ``reset``.
_seen: dict[int, tuple] = {}


def reset() -> None:
    """Forget what every code object has been seen with (the next capture is static again)."""
    _seen.clear()


def _seen_of(code) -> dict:
    key = id(code)
    entry = _seen.get(key)
    if entry is None or entry[0]() is not code:
        entry = _seen[key] = (weakref.ref(code, lambda _, key=key: _seen.pop(key, None)), {})
    return entry[1]


def inherit(code, source_expr: str, seen) -> None:
    """Start ``code``'s record for an input as ``seen`` (sizes with ``DYNAMIC``s, or ``DYNAMIC``).

    A resume or chain function is new code whose arguments the frame before it
    already found symbolic: it starts with what that frame learned, instead of
    a static first capture of its own.  What the code has seen itself wins.
    """
    _seen_of(code).setdefault(source_expr, seen)


class ShapePolicy:
    """The dynamic-shape decisions of one capture of ``code`` (``dynamic`` is the optimize option)."""

    def __init__(self, code, dynamic: bool | None):
        self.dynamic = dynamic
        self._seen = _seen_of(code) if dynamic is None else None

    def expects_symbolic(self) -> bool:
        """Whether this capture will likely have symbolic inputs (so it starts with a ShapeEnv)."""
        if self.dynamic:
            return True
        return self._seen is not None and any(
            v is DYNAMIC or type(v) is tuple and DYNAMIC in v for v in self._seen.values())

    def tensor_dims(self, source_expr: str, t) -> list[DimChoice] | None:
        """One choice per dim of ``t`` (reached by ``source_expr``), or None when all are static."""
        if self.dynamic is False:
            return None
        sizes = tuple(t.shape)
        choices = [_AUTO if self.dynamic else _STATIC] * len(sizes)
        if self._seen is not None:
            before = self._seen.get(source_expr)
            merged = _merge_sizes(before, sizes)
            self._seen[source_expr] = merged
            if before is not None:
                choices = [_AUTO if merged is DYNAMIC or merged[d] is DYNAMIC else _STATIC
                           for d in range(len(sizes))]
        d = t.__dict__
        if "_dynamo_weak_dynamic_indices" in d or "_dynamo_dynamic_indices" in d or "_dynamo_static_indices" in d:
            for i in _indices(t, "_dynamo_weak_dynamic_indices"):
                if i < len(choices):
                    choices[i] = _AUTO
            ranges = {r.dim: r for r in _indices(t, "_dynamo_dynamic_range")}
            for i in _indices(t, "_dynamo_dynamic_indices"):
                if i < len(choices):
                    r = ranges.get(i)
                    choices[i] = DimChoice(True, True, getattr(r, "min", None), getattr(r, "max", None))
            for i in _indices(t, "_dynamo_static_indices"):
                if i < len(choices):
                    choices[i] = _STATIC
        return choices if any(c.symbolic for c in choices) else None

    def int_is_symbolic(self, source_expr: str, value: int) -> bool:
        """Whether an int argument (reached by ``source_expr``) is a ``SymInt`` in the graph."""
        if self.dynamic is False:
            return False
        if self._seen is not None:
            before = self._seen.get(source_expr)
            if type(before) is tuple:
                before = None  # the source held a tensor before: another kind of input
            merged = value if before is None or before == value else DYNAMIC
            self._seen[source_expr] = merged
            if merged is not DYNAMIC:
                return False
        # 0 and 1 stay specialized: code tests them (``if n == 1``) far more often than other values.
        return value not in (0, 1)


    def values_readable(self, source_expr: str, values: tuple) -> bool:
        """Whether the capture may read (and guard on) the values of the tensor reached by ``source_expr``:
        yes unless an earlier capture of the code read other values there (``dynamic=False``: always)."""
        if self.dynamic is False or self._seen is None:
            return self.dynamic is False
        key = (_VALUES, source_expr)
        before = self._seen.setdefault(key, values)
        if before != values:
            self._seen[key] = _VARIED
        return self._seen[key] is not _VARIED


#: Keys of tensor values in a code's record, beside its sources' sizes; the record of values that differed.
_VALUES = "values"
_VARIED = object()


def _merge_sizes(before, sizes: tuple):
    """What a source has been seen with, after also seeing ``sizes``."""
    if before is None or before is not DYNAMIC and type(before) is not tuple:
        return sizes  # first seen as a tensor (the source held an int before: another kind of input)
    if before is DYNAMIC or len(before) != len(sizes):
        return DYNAMIC
    return tuple(b if b == s else DYNAMIC for b, s in zip(before, sizes))
