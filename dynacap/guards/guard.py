"""``Guard`` (one assumption about one source) and ``GuardSet`` (all of a trace's).

A guard is a Python boolean expression over ``L`` (frame locals), ``G``
(frame globals) and ``B`` (builtins), plus the objects it refers to (kept
in ``constants``, referenced by name).  Guard kinds, cheapest first, are
ordered by ``COST`` so that the compiled check fails fast.
"""
from __future__ import annotations

import math
import struct
import weakref
from dataclasses import dataclass, field

import torch

from ..source import Source

#: Evaluation order: cheap identity/type checks first, tensors last.
COST = {
    "GLOBAL_STATE": 0,
    "ID_MATCH": 1,
    "TYPE_MATCH": 2,
    "EQUALS_MATCH": 3,
    "LENGTH": 3,
    "NOT_PRESENT": 3,
    "MODULE_STATE": 4,
    "TENSOR_MATCH": 9,
    "TENSOR_ALIASING": 9.5,  # after the tensor checks: it reads the tensors they bound (``check.py``)
    "SYMBOLIC_SHAPE": 10,
}


@dataclass
class Guard:
    kind: str
    source: Source | None
    expr: str
    constants: dict = field(default_factory=dict)
    description: str = ""
    #: The template ``expr`` was formatted from and the objects it names (``GuardSet.add``).
    template: str = ""
    objects: dict = field(default_factory=dict)
    #: What the C guard program checks, as data (``program.py``); None: lowered from ``template``
    #: if it is a known one, else checked by Python.
    op: tuple | None = None

    def __str__(self) -> str:
        return f"{self.kind:<13} {self.description or self.expr}"


class GuardSet:
    """Accumulates guards during one trace, deduplicated by expression."""

    def __init__(self):
        self._guards: dict[str, Guard] = {}
        self._counter = 0
        #: id(object) -> its ``WeakGuarded``: one reference per object, so equal guards deduplicate.
        self._weak: dict[int, "WeakGuarded"] = {}
        #: id(source) -> (source, its expression) (see ``_expr``).
        self._exprs: dict[int, tuple] = {}

    def __len__(self) -> int:
        return len(self._guards)

    def __iter__(self):
        return iter(sorted(self._guards.values(), key=lambda g: COST[g.kind]))

    def _expr(self, source: Source) -> str:
        """``source.expr()``, computed once per source object (a module parameter's takes ~5 µs and is
        wanted by several guards and their descriptions).  Sources are immutable and the memo holds
        each one it was asked about, so its id names that one source while the set lives."""
        return self._known(source)[1]

    def _known(self, source: Source) -> list:
        """``[source, its expression, its constants or None until asked]``, memoised by ``id(source)``."""
        known = self._exprs.get(id(source))
        if known is None or known[0] is not source:
            known = self._exprs[id(source)] = [source, source.expr(), None]
        return known

    def _const(self) -> str:
        name = f"___c{self._counter}"
        self._counter += 1
        return name

    def add(self, kind: str, source: Source | None, template: str, description: str = "", op: tuple | None = None,
            **objects) -> None:
        """Add ``template`` formatted with ``s`` (the source expression) and named objects.

        Objects are bound as constants of the compiled check, so ``{name}``
        in the template becomes a reference to the object, not its repr.
        """
        known = self._known(source) if source is not None else None
        text = known[1] if known is not None else ""
        # Equal guards are found before anything is formatted: most guards a trace asks for are repeats.
        key = (template, text, *[(k, id(obj)) for k, obj in objects.items()]) if objects else (template, text)
        if key in self._guards:
            return
        names = {key: self._const() for key in objects}
        expr = template.format(s=text, **names)
        constants = {names[k]: obj for k, obj in objects.items()}
        if known is not None:
            if known[2] is None:
                known[2] = source.constants()
            constants.update(known[2])
        self._guards[key] = Guard(kind, source, expr, constants, description or expr, template, objects, op)

    def id_match(self, source: Source, obj) -> None:
        if isinstance(obj, torch.nn.Module):
            # Held weakly: a cache entry must not keep a model alive (entries live on code objects,
            # which the garbage collector does not look into).  ``capture`` drops the entry when
            # the model dies (``WeakGuarded``).
            ref = self._weak.get(id(obj))
            if ref is None or ref() is not obj:
                ref = self._weak[id(obj)] = WeakGuarded(obj)
            self.add("ID_MATCH", source, "{s} is {obj}()", f"{self._expr(source)} is {_short(obj)}",
                     op=("ID_WEAK", source, ref), obj=ref)
            return
        self.add("ID_MATCH", source, "{s} is {obj}", f"{self._expr(source)} is {_short(obj)}", op=("ID", source, obj),
                 obj=obj)

    def type_match(self, source: Source, obj) -> None:
        t = type(obj)
        self.add("TYPE_MATCH", source, "type({s}) is {t}", f"type({self._expr(source)}) is {t.__qualname__}",
                 op=("TYPE", source, t), t=t)

    def equals_match(self, source: Source, value) -> None:
        """``{s}`` is a constant of the same type and the same value, bit for bit.

        ``==`` is not enough: ``-0.0 == 0.0``, ``nan != nan`` and, inside containers,
        ``1 == True == 1.0``.  Those cases compare exactly (floats by their bits); the
        common ones keep a single ``==`` after the type check.
        """
        if value is None or value is True or value is False or value is Ellipsis:
            self.add("ID_MATCH", source, f"{{s}} is {value!r}", op=("ID", source, value))
            return
        t = type(value)
        desc = f"{self._expr(source)} == {value!r}"
        if t is float and not _plain_float(value):
            self.add("EQUALS_MATCH", source, "type({s}) is float and ___float_bits({s}) == {bits}", desc,
                     op=("FLOAT_BITS", source, FLOAT_BITS(value)), bits=FLOAT_BITS(value))
        elif t is complex and not (_plain_float(value.real) and _plain_float(value.imag)):
            self.add("EQUALS_MATCH", source,
                     "type({s}) is complex and ___complex_bits({s}.real, {s}.imag) == {bits}", desc,
                     op=("COMPLEX_BITS", source, COMPLEX_BITS(value.real, value.imag)),
                     bits=COMPLEX_BITS(value.real, value.imag))
        elif t in (int, float, str, bytes, complex) and repr(value) == repr(t(value)) and _literal_ok(value):
            literal = repr(value).replace("{", "{{").replace("}", "}}")
            self.add("EQUALS_MATCH", source, f"type({{s}}) is {{t}} and {{s}} == {literal}", desc,
                     op=("EQ", source, t, value), t=t)
        elif needs_exact_match(value):
            self.add("EQUALS_MATCH", source, "___same_constant({s}, {v})", desc, op=("SAME", source, value), v=value)
        else:
            self.add("EQUALS_MATCH", source, "type({s}) is {t} and {s} == {v}", desc, op=("EQ", source, t, value),
                     t=t, v=value)

    def keys_match(self, source: Source, keys: list) -> None:
        """The keys of a dict (or ``_modules``), in order; exact unless they are all plain strings."""
        desc = f"keys of {self._expr(source)} == {keys}"
        if all(type(k) is str for k in keys):
            self.add("EQUALS_MATCH", source, "list({s}) == {keys}", desc, op=("KEYS", source, keys), keys=keys)
        else:
            self.add("EQUALS_MATCH", source, "___same_constant(list({s}), {keys})", desc,
                     op=("SAME_KEYS", source, keys), keys=keys)

    def length(self, source: Source, obj) -> None:
        self.type_match(source, obj)
        self.add("LENGTH", source, f"len({{s}}) == {len(obj)}", op=("LEN_EQ", source, len(obj)))

    def tensor_match(self, source: Source, t: torch.Tensor, fake: torch.Tensor | None = None) -> None:
        """Type, dtype, device, requires_grad, sizes and strides of a tensor input.

        With ``fake`` (the input's fake tensor), dims and strides it has as symbols
        (dynamic shapes) are not compared here: the ShapeEnv's guards say what they
        may be (``GuardSet.relation``, kind ``SYMBOLIC_SHAPE``).
        """
        size = _pattern(t.shape, fake.shape if fake is not None else None)
        stride = _pattern(t.stride(), fake.stride() if fake is not None else None)
        symbolic = None in size or None in stride
        shown = [d if d is not None else s for d, s in zip(size, fake.shape)] if None in size else list(size)
        desc = (f"{self._expr(source)}: {type(t).__name__} {str(t.dtype).replace('torch.', '')}{shown} "
                f"stride={list(stride)} device={t.device} requires_grad={t.requires_grad}")
        # One inline expression (no helper call): the tensor is read once through a walrus.
        device = "{v}.is_cpu" if t.device.type == "cpu" else "{v}.device == {device}"
        template = ("(type({v} := {s}) is {t} and {v}.dtype is {dtype} and {v}.requires_grad is "
                    f"{t.requires_grad} and {_matches('{v}.shape', '{sh}' if symbolic else None, size)} and "
                    f"{_matches('{v}.stride()', '{st}' if symbolic else None, stride)} and {device})")
        # A symbolic tensor's sizes and strides are bound to locals (``SHAPE``/``STRIDE``), which
        # its symbolic-shape guards read instead of calling ``size()`` again (``check.py``).
        bound = {"sh": SHAPE, "st": STRIDE} if symbolic else {}
        spec = TensorSpec.of(t, size, stride)
        self.add("TENSOR_MATCH", source, template.replace("{v}", "{var}"), desc, op=("TENSOR", source, spec), spec=spec,
                 var=VARIABLE, t=type(t), dtype=t.dtype, device=t.device, **bound)

    def relation(self, expr: str, sources: list, description: str = "", kind: str = "EQUALS_MATCH") -> None:
        """A fact about several sources at once, written out: ``(L['a'] is G['b']) is True``, or a
        relation the ShapeEnv recorded (``SYMBOLIC_SHAPE``: ``2 <= L['x'].size()[0]``)."""
        if expr not in self._guards:
            constants = {}
            for source in sources:
                constants.update(source.constants())
            op = None
            if kind == "EQUALS_MATCH" and len(sources) == 2:
                a, b = sources
                op = next((op for same in (True, False) for text, op in (
                    (f"({a.expr()} is {b.expr()}) is {same}", ("IS_SOURCE", a, b, same)),
                    (f"({b.expr()} in {a.expr()}) is {same}", ("IN_SOURCE", a, b, same)),
                    (f"({a.expr()} in {b.expr()}) is {same}", ("IN_SOURCE", b, a, same))) if expr == text), None)
            self._guards[expr] = Guard(kind, None, expr, constants, description or expr, op=op)

    def distinct_tensors(self, sources: list[Source]) -> None:
        """Tensor inputs that were different objects must stay different (graphs assume no aliasing)."""
        if len(sources) < 2:
            return
        ids = ", ".join(f"id({s.expr()})" for s in sources)
        self.add("TENSOR_ALIASING", None, f"len({{{{{ids}}}}}) == {len(sources)}",
                 f"tensors {', '.join(s.expr() for s in sources)} are distinct objects", op=("DISTINCT", tuple(sources)))

    def global_state(self) -> None:
        """Ambient torch state the graph was traced under: grad mode, default dtype, autocast."""
        grad = torch.is_grad_enabled()
        self.add("GLOBAL_STATE", None, f"___grad_enabled() is {grad}", f"torch.is_grad_enabled() is {grad}",
                 op=("CALL_IS", torch.is_grad_enabled, grad))
        dtype = torch.get_default_dtype()
        self.add("GLOBAL_STATE", None, "___default_dtype() is {dtype}", f"torch.get_default_dtype() is {dtype}",
                 op=("CALL_IS", torch.get_default_dtype, dtype), dtype=dtype)
        autocast = torch._C._is_any_autocast_enabled()
        self.add("GLOBAL_STATE", None, f"___any_autocast() is {autocast}", f"autocast enabled is {autocast}",
                 op=("CALL_IS", torch._C._is_any_autocast_enabled, autocast))


class WeakGuarded(weakref.ref):
    """A weak reference an identity guard checks against (``L['self'] is ___c0()``)."""


@dataclass(frozen=True)
class TensorSpec:
    """Everything a captured graph assumed about one tensor input."""

    type: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    size: tuple
    stride: tuple

    @staticmethod
    def of(t: torch.Tensor, size: tuple, stride: tuple) -> "TensorSpec":
        """The spec of ``t``; ``size``/``stride`` may hold None for symbolic dims (any value matches)."""
        return TensorSpec(type(t), t.dtype, t.device, t.requires_grad, size, stride)

    def mismatch(self, t) -> str | None:
        """A readable description of the first difference, or None if ``t`` matches."""
        if type(t) is not self.type:
            return f"type {type(t).__name__} != {self.type.__name__}"
        for what, got, want in (
            ("dtype", t.dtype, self.dtype),
            ("device", t.device, self.device),
            ("requires_grad", t.requires_grad, self.requires_grad),
            ("size", tuple(t.shape), self.size),
            ("stride", tuple(t.stride()), self.stride),
        ):
            if isinstance(want, tuple) and None in want and len(got) == len(want):
                got = tuple(None if w is None else g for g, w in zip(got, want))
            if got != want:
                return f"{what} {got} != {want}"
        return None


def _pattern(values, symbolic) -> tuple:
    """The ints of ``values`` (sizes or strides), None where ``symbolic`` (the fake's) has a symbol."""
    if symbolic is None:
        return tuple(values)
    return tuple(None if isinstance(s, torch.SymInt) else v for v, s in zip(values, symbolic))


def _matches(read: str, var: str | None, pattern: tuple) -> str:
    """An expression checking ``read`` (a size or stride tuple) against ``pattern`` (None: any value).

    With ``var``, the tuple read is also stored in that local.
    """
    if var is None:
        return f"{read} == {pattern!r}"
    if None not in pattern:
        return f"({var} := {read}) == {pattern!r}"
    checks = [f"len({var} := {read}) == {len(pattern)}"]
    checks += [f"{var}[{i}] == {v}" for i, v in enumerate(pattern) if v is not None]
    return " and ".join(checks)


class _Name:
    """A placeholder object: ``GuardSet.add`` gives it a unique name usable as a local variable."""


#: The local a tensor check stores its tensor in (``TENSOR_ALIASING`` reads it).
VARIABLE = _Name()
#: The locals a symbolic tensor's ``TENSOR_MATCH`` stores its sizes and strides in.
SHAPE = _Name()
STRIDE = _Name()


def _short(obj) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if name:
        return f"<{type(obj).__name__} {name}>"
    return f"<{type(obj).__name__} at {id(obj):#x}>"


def _literal_ok(value) -> bool:
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return True


FLOAT_BITS = struct.Struct("<d").pack
COMPLEX_BITS = struct.Struct("<dd").pack


def _plain_float(x: float) -> bool:
    """Whether ``==`` on this float is exact: not a zero (``-0.0 == 0.0``) and not a NaN."""
    return x != 0.0 and not math.isnan(x)


#: Types whose ``==`` is exact between two instances of the same type.
_EXACT_EQ = (int, str, bytes, type(None), type(Ellipsis), type(NotImplemented), range)


def needs_exact_match(value) -> bool:
    """Whether ``type(a) is type(b) and a == b`` could accept a different constant than ``value``.

    True for floats and complex numbers that are zeros or NaNs, and for containers holding
    floats, complex numbers or bools (``(1,) == (True,) == (1.0,)``).
    """
    t = type(value)
    if t is float:
        return not _plain_float(value)
    if t is complex:
        return not (_plain_float(value.real) and _plain_float(value.imag))
    if t in (tuple, frozenset, list) or isinstance(value, torch.Size):
        return any(type(x) in (float, complex, bool) or needs_exact_match(x) for x in value)
    if t is slice:
        return needs_exact_match((value.start, value.stop, value.step))
    return False


def same_constant(a, b) -> bool:
    """``a`` and ``b`` are the same constant: same types throughout, floats equal bit for bit."""
    t = type(a)
    if t is not type(b):
        return False
    if t is float:
        return FLOAT_BITS(a) == FLOAT_BITS(b)
    if t is complex:
        return COMPLEX_BITS(a.real, a.imag) == COMPLEX_BITS(b.real, b.imag)
    if t in (tuple, list) or isinstance(a, torch.Size):
        return len(a) == len(b) and all(same_constant(x, y) for x, y in zip(a, b))
    if t is frozenset:
        # Elements of a set are distinct under ==, so matching each of b's in a is a bijection.
        return len(a) == len(b) and all(any(same_constant(x, y) for y in a) for x in b)
    if t is slice:
        return same_constant((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    if t in _EXACT_EQ:
        return a == b
    return a is b or (a == b) is True
