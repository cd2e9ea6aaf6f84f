"""``Guard`` (one assumption about one source) and ``GuardSet`` (all of a trace's).

A guard is a Python boolean expression over ``L`` (frame locals), ``G``
(frame globals) and ``B`` (builtins), plus the objects it refers to (kept
in ``constants``, referenced by name).  Guard kinds, cheapest first, are
ordered by ``COST`` so that the compiled check fails fast.
"""
from __future__ import annotations

import math
import operator
import struct
import weakref

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


class Guard:
    """One assumption: ``kind``, the ``source`` it reads, ``template`` and the ``objects`` it names.

    ``expr`` (the template formatted with the source's expression, each object named ``___cN``),
    ``constants`` (those names and the source's, bound into the compiled check) and ``description``
    are made when first read: a capture makes thousands of guards, and lowering them to the C
    program (``program.py``) reads only ``kind``, ``source``, ``op``, ``template`` and ``objects``.
    A template or description given as ``(fn, *args)`` is ``fn(*args)``, made when first read; the
    args are what the text is made of (nothing that changes, nothing the guard must not hold).
    """

    __slots__ = ("kind", "source", "objects", "op", "_template", "_text", "_first", "_description", "_expr",
                 "_constants")

    def __init__(self, kind: str, source: Source | None, template, objects: dict, op: tuple | None, text: str,
                 first: int, description):
        self.kind = kind
        self.source = source
        self.objects = objects
        #: What the C guard program checks, as data (``program.py``); None: lowered from ``template``
        #: if it is a known one, else checked by Python.
        self.op = op
        self._template = template
        self._text = text  # the source's expression
        self._first = first  # the number in the name of the first object
        self._description = description
        self._expr = None
        self._constants = None

    @classmethod
    def written(cls, kind: str, expr: str, constants: dict, description: str, op: tuple | None) -> "Guard":
        """A guard given as its expression (no template, no source): ``GuardSet.relation``."""
        g = cls(kind, None, "", {}, op, "", 0, description)
        g._expr, g._constants = expr, constants
        return g

    @property
    def template(self) -> str:
        t = self._template
        if type(t) is tuple:
            t = self._template = t[0](*t[1:])
        return t

    @property
    def expr(self) -> str:
        if self._expr is None:
            first = self._first
            names = {k: f"___c{first + i}" for i, k in enumerate(self.objects)}
            self._expr = self.template.format(s=self._text, **names)
        return self._expr

    @property
    def constants(self) -> dict:
        if self._constants is None:
            first = self._first
            constants = {f"___c{first + i}": obj for i, obj in enumerate(self.objects.values())}
            if self.source is not None:
                constants.update(self.source.constants())
            self._constants = constants
        return self._constants

    @property
    def description(self) -> str:
        d = self._description
        if type(d) is tuple:
            d = self._description = d[0](*d[1:])
        return d or self.expr

    def __str__(self) -> str:
        return f"{self.kind:<13} {self.description}"

    def __repr__(self) -> str:
        return f"Guard({self.kind}, {self.expr!r})"


class GuardSet:
    """Accumulates guards during one trace, deduplicated by expression."""

    def __init__(self):
        self._guards: dict = {}
        self._counter = 0
        #: id(object) -> its ``WeakGuarded``: one reference per object, so equal guards deduplicate.
        self._weak: dict[int, "WeakGuarded"] = {}

    def __len__(self) -> int:
        return len(self._guards)

    def __iter__(self):
        # Stable, by cost; the keys are made and compared in C (a large model has thousands of guards).
        guards = list(self._guards.values())
        costs = list(map(COST.__getitem__, map(_KIND, guards)))
        return map(guards.__getitem__, sorted(range(len(guards)), key=costs.__getitem__))

    def add(self, kind: str, source: Source | None, template: str, description="", op: tuple | None = None,
            **objects) -> None:
        """Add ``template`` formatted with ``s`` (the source expression) and named objects.

        Objects are bound as constants of the compiled check, so ``{name}``
        in the template becomes a reference to the object, not its repr.
        ``description`` may be ``(fn, *args)``, made when first read (``Guard``).
        """
        text = source.expr() if source is not None else ""
        # Equal guards are found before anything is made: most guards a trace asks for are repeats.
        key = (template, text, *objects, *map(id, objects.values())) if objects else (template, text)
        if key not in self._guards:
            self._guards[key] = Guard(kind, source, template, objects, op, text, self._counter, description)
            self._counter += len(objects)

    def id_match(self, source: Source, obj) -> None:
        if isinstance(obj, torch.nn.Module):
            # Held weakly: a cache entry must not keep a model alive (entries live on code objects,
            # which the garbage collector does not look into).  ``capture`` drops the entry when
            # the model dies (``WeakGuarded``).
            ref = self._weak.get(id(obj))
            if ref is None or ref() is not obj:
                ref = self._weak[id(obj)] = WeakGuarded(obj)
            self.add("ID_MATCH", source, "{s} is {obj}()", f"{source.expr()} is {_short(obj)}",
                     op=("ID_WEAK", source, ref), obj=ref)
            return
        # The description holds ``obj``, as the guard does.
        self.add("ID_MATCH", source, "{s} is {obj}", (_is_description, source, obj), op=("ID", source, obj), obj=obj)

    def type_match(self, source: Source, obj) -> None:
        t = type(obj)
        self.add("TYPE_MATCH", source, "type({s}) is {t}", (_type_description, source, t), op=("TYPE", source, t),
                 t=t)

    def equals_match(self, source: Source, value) -> None:
        """``{s}`` is a constant of the same type and the same value, bit for bit.

        ``==`` is not enough: ``-0.0 == 0.0``, ``nan != nan`` and, inside containers,
        ``1 == True == 1.0``.  Those cases compare exactly (floats by their bits); the
        common ones keep a single ``==`` after the type check.
        """
        if value is None or value is True or value is False or value is Ellipsis:
            self.add("ID_MATCH", source, _IS_LITERAL[value], op=("ID", source, value))
            return
        t = type(value)
        shown = repr(value)
        if t is float and not _plain_float(value):
            bits = FLOAT_BITS(value)
            self.add("EQUALS_MATCH", source, "type({s}) is float and ___float_bits({s}) == {bits}",
                     f"{source.expr()} == {shown}", op=("FLOAT_BITS", source, bits), bits=bits)
        elif t is complex and not (_plain_float(value.real) and _plain_float(value.imag)):
            bits = COMPLEX_BITS(value.real, value.imag)
            self.add("EQUALS_MATCH", source,
                     "type({s}) is complex and ___complex_bits({s}.real, {s}.imag) == {bits}",
                     f"{source.expr()} == {shown}", op=("COMPLEX_BITS", source, bits), bits=bits)
        elif t in _LITERAL_TYPES and _literal_ok(value):  # exact types: ``t(value)`` would be ``value`` again
            literal = shown.replace("{", "{{").replace("}", "}}")
            self.add("EQUALS_MATCH", source, f"type({{s}}) is {{t}} and {{s}} == {literal}",
                     f"{source.expr()} == {shown}", op=("EQ", source, t, value), t=t)
        elif needs_exact_match(value):
            self.add("EQUALS_MATCH", source, "___same_constant({s}, {v})", f"{source.expr()} == {shown}",
                     op=("SAME", source, value), v=value)
        else:
            self.add("EQUALS_MATCH", source, "type({s}) is {t} and {s} == {v}", f"{source.expr()} == {shown}",
                     op=("EQ", source, t, value), t=t, v=value)

    def keys_match(self, source: Source, keys: list) -> None:
        """The keys of a dict (or ``_modules``), in order; exact unless they are all plain strings."""
        desc = f"keys of {source.expr()} == {keys}"
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
        device = t.device
        spec = TensorSpec(type(t), t.dtype, device, t.requires_grad, size, stride)
        # The template and the description are made from the spec when first read.  The spec is a new
        # object, so this guard never equals another (its key names the spec).
        objects = {"spec": spec, "var": VARIABLE, "t": spec.type, "dtype": spec.dtype, "device": device}
        if None in size or None in stride:
            # A symbolic tensor's sizes and strides are bound to locals (``SHAPE``/``STRIDE``), which
            # its symbolic-shape guards read instead of calling ``size()`` again (``check.py``).
            objects.update(sh=SHAPE, st=STRIDE)
        text = source.expr()
        if None in size:  # the fake's symbols are shown now: the guard must not hold them (nor their ShapeEnv)
            description = _tensor_description(text, spec, [d if d is not None else s for d, s in zip(size, fake.shape)])
        else:
            description = (_tensor_description, text, spec, None)
        self._guards[(_tensor_template, id(spec))] = Guard(
            "TENSOR_MATCH", source, (_tensor_template, spec), objects, ("TENSOR", source, spec), text, self._counter,
            description)
        self._counter += len(objects)

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
            self._guards[expr] = Guard.written(kind, expr, constants, description, op)

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


_KIND = operator.attrgetter("kind")


#: ``equals_match``'s templates of the constants checked by identity.
_IS_LITERAL = {None: "{s} is None", True: "{s} is True", False: "{s} is False", Ellipsis: "{s} is Ellipsis"}
_LITERAL_TYPES = (int, float, str, bytes, complex)


def _is_description(source: Source, obj) -> str:
    return f"{source.expr()} is {_short(obj)}"


def _type_description(source: Source, t: type) -> str:
    return f"type({source.expr()}) is {t.__qualname__}"


def _tensor_template(spec: "TensorSpec") -> str:
    """``tensor_match``'s template: one inline expression (no helper call), the tensor read once through a walrus."""
    symbolic = None in spec.size or None in spec.stride
    device = "{var}.is_cpu" if spec.device.type == "cpu" else "{var}.device == {device}"
    return ("(type({var} := {s}) is {t} and {var}.dtype is {dtype} and {var}.requires_grad is "
            f"{spec.requires_grad} and {_matches('{var}.shape', '{sh}' if symbolic else None, spec.size)} and "
            f"{_matches('{var}.stride()', '{st}' if symbolic else None, spec.stride)} and {device})")


def _tensor_description(text: str, spec: "TensorSpec", shown: list | None) -> str:
    """``shown``: the sizes with the fake's symbols where the spec has None (dynamic shapes)."""
    return (f"{text}: {spec.type.__name__} {str(spec.dtype).replace('torch.', '')}"
            f"{shown if shown is not None else list(spec.size)} stride={list(spec.stride)} device={spec.device} "
            f"requires_grad={spec.requires_grad}")


class WeakGuarded(weakref.ref):
    """A weak reference an identity guard checks against (``L['self'] is ___c0()``)."""


class TensorSpec:
    """Everything a captured graph assumed about one tensor input (compared and shown by its fields)."""

    __slots__ = ("type", "dtype", "device", "requires_grad", "size", "stride")

    def __init__(self, type: type, dtype: torch.dtype, device: torch.device, requires_grad: bool, size: tuple,
                 stride: tuple):
        # Not a frozen dataclass: its ``__init__`` costs a large model's capture a millisecond.  Never changed.
        self.type = type
        self.dtype = dtype
        self.device = device
        self.requires_grad = requires_grad
        self.size = size  # may hold None for symbolic dims (any value matches), as ``stride``
        self.stride = stride

    def _fields(self) -> tuple:
        return self.type, self.dtype, self.device, self.requires_grad, self.size, self.stride

    def __eq__(self, other):
        return self._fields() == other._fields() if type(other) is TensorSpec else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"TensorSpec(type={self.type!r}, dtype={self.dtype!r}, device={self.device!r}, "
                f"requires_grad={self.requires_grad!r}, size={self.size!r}, stride={self.stride!r})")

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
    if symbolic is None or _INTS.issuperset(map(type, symbolic)):
        return tuple(values)
    return tuple(None if isinstance(s, torch.SymInt) else v for v, s in zip(values, symbolic))


_INTS = frozenset((int,))


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
        return value == value and value not in _INFINITIES
    return True


_INFINITIES = (float("inf"), float("-inf"))


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
