"""Lower a trace's guards to the data of a C guard program (``csrc/guards.c``).

A program is two tuples: *steps* (how to read each source: a local or global
by key, a constant, an attribute, an item...; each from an earlier step) and
*checks* (what must hold of a step's value).  ``Guard.op`` says what a guard
checks when ``GuardSet`` knows it; a few templates written elsewhere are
recognised here; every other guard is left to Python (``Lowered.python``),
which the program calls after its own checks.  Nothing here decides what to
guard, and nothing runs a guard.
"""
from __future__ import annotations

import ast
import builtins as _builtins
import ctypes
import os
import re
import sys
from dataclasses import dataclass, field

import torch

from .._C import _guard_setup, _tensor_meta
from ..source import (
    AttrSource,
    BuiltinSource,
    CellContentsSource,
    ClassSource,
    DictEntrySource,
    DictStorageSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    KeyedItemSource,
    LocalSource,
    ModuleGlobalSource,
    Source,
)
from .guard import Guard, TensorSpec, _short, same_constant

# Step kinds, as csrc/guards.c numbers them.
(SRC_LOCAL, SRC_GLOBAL, SRC_CONST, SRC_ATTR, SRC_GENERIC_ATTR, SRC_ITEM, SRC_DICT_STORAGE, SRC_GLOBALS,
 SRC_TYPE, SRC_KEYED_ITEM) = range(10)
# Check kinds, as csrc/guards.c numbers them.
(CK_TYPE, CK_ID, CK_ID_WEAK, CK_EQ, CK_FLOAT_BITS, CK_COMPLEX_BITS, CK_KEYS, CK_LEN_EQ, CK_LEN_GT, CK_FALSY,
 CK_NOT_IN, CK_IN, CK_CALL_IS, CK_CALL_TRUE, CK_TENSOR, CK_DISTINCT, CK_HAS_ATTR, CK_IS_SOURCE, CK_IN_ANY,
 CK_INT_EXPR, CK_SAME, CK_IN_SOURCE) = range(22)
# Instructions of an integer expression (CK_INT_EXPR), as csrc/guards.c numbers them.
(IE_CONST, IE_SIZE, IE_STRIDE, IE_INT, IE_ADD, IE_SUB, IE_MUL, IE_FLOORDIV, IE_MOD, IE_NEG,
 IE_EQ, IE_NE, IE_LT, IE_LE, IE_GT, IE_GE) = range(16)
_BINARY = {ast.Add: IE_ADD, ast.Sub: IE_SUB, ast.Mult: IE_MUL, ast.FloorDiv: IE_FLOORDIV, ast.Mod: IE_MOD}
_COMPARE = {ast.Eq: IE_EQ, ast.NotEq: IE_NE, ast.Lt: IE_LT, ast.LtE: IE_LE, ast.Gt: IE_GT, ast.GtE: IE_GE}
_INT64 = range(-2**63, 2**63)
_OPERATOR_TEXT = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

# Templates written outside ``GuardSet`` (the file that writes each is named); a template that
# changes there no longer matches and its guard runs in Python: still right, only slower.
_NAME = r"'[^'\\]*'"
_DICT = r"\{s\}\.__dict__|object\.__getattribute__\(\{s\}, '__dict__'\)"
#: values/module.py: a module's structure and hooks.
_MODULE_STATE = ("list({s}._parameters) == {p} and list({s}._buffers) == {b} and list({s}._modules) == {c} "
                 "and not ({s}._forward_hooks or {s}._forward_pre_hooks or {s}._backward_hooks "
                 "or 'forward' in {s}.__dict__)")
#: values/wrap.py: a function guarded by code and globals.
_FUNCTION = "type({s}) is {t} and {s}.__code__ is {code} and {s}.__globals__ is {g}"
#: values/containers.py, values/sets.py: ``len(s) == n``, ``len(s) > i``.
_LENGTH = re.compile(r"len\(\{s\}\) (==|>) (\d+)")
#: interpreter/tracer.py, ops_variables.py: a name (not) in the globals.
_NAME_IN = re.compile(rf"({_NAME}|\"[^\"\\]*\") (not in|in) (G|\{{g\}})")
#: values/objects.py: a name not in an instance dict; a class attribute; a missing attribute.
_NOT_IN_DICT = re.compile(rf"({_NAME}) not in ({_DICT})")
_CLASS_ATTR = re.compile(r"type\(\{s\}\)\.(\w+) is \{attr\}")
_ATTR_IS = re.compile(r"\{s\}\.(\w+) is \{attr\}")
_MISSING = re.compile(rf"(?:({_NAME}) not in ({_DICT}) and )?not hasattr\(type\(\{{s\}}\), ({_NAME})\)")
#: values/attributes.py: ``('x' in {s}._parameters or ... or 'x' in {s}.__dict__) is own``.
_OWN = re.compile(rf"\(({_NAME}) in \{{s\}}\._parameters or \1 in \{{s\}}\._buffers or \1 in \{{s\}}\._modules "
                  rf"or \1 in \{{s\}}\.__dict__\) is (True|False)")


@dataclass
class Lowered:
    """A guard list as program data: ``steps``/``checks`` for ``_C.GuardProgram``, the guards left to Python."""

    steps: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    lines: list = field(default_factory=list)  # one readable line per check
    python: list = field(default_factory=list)  # guards the program leaves to its Python fallback


#: Types csrc/guard_checks.c's same_constant compares itself.
_C_ATOMS = (float, complex, int, str, bytes, bool, type(None), type(Ellipsis), type(NotImplemented), range)


def _c_constant(value) -> bool:
    """Whether ``value`` is made of types the C ``same_constant`` knows (a ``torch.Size`` is not one)."""
    t = type(value)
    if t in _C_ATOMS:
        return True
    if t in (tuple, list, frozenset):
        return all(_c_constant(x) for x in value)
    if t is slice:
        return all(_c_constant(x) for x in (value.start, value.stop, value.step))
    return False


class _NotLowered(Exception):
    pass


class _Globals(Source):
    """The frame's globals dict itself (``'name' not in G``)."""

    def expr(self) -> str:
        return "G"


@dataclass(frozen=True, eq=False)
class _Constant(Source):
    """An object a guard names (``'name' not in {g}``: another module's globals)."""

    obj: object

    def expr(self) -> str:
        return f"<constant at {id(self.obj):#x}>"


@dataclass(frozen=True)
class _TypeOf(Source):
    """``type(base)``."""

    base: Source

    def expr(self) -> str:
        return f"type({self.base.expr()})"


class _Builder:
    def __init__(self, builtins_dict: dict | None):
        self.out = Lowered()
        self.builtins = builtins_dict if builtins_dict is not None else _builtins.__dict__
        self._steps: dict = {}  # source expression (or constant id) -> step index
        # Steps the program has checked before any symbolic-shape guard (which come last): exact
        # tensors read through the shim, exact ints.
        self._tensors: set[int] = set()
        self._ints: set[int] = set()
        #: id(source) -> (source, its expression): guards of one module share its source objects, and
        #: a parameter's expression takes microseconds to build.  Sources are immutable and each is
        #: held here, so the id names that one source while the builder lives.
        self._exprs: dict[int, tuple] = {}
        #: id(source) -> (source, its step or None): the same source object read again (a module's, by
        #: each of its guards) finds its step without its expression.  Held as ``_exprs`` holds them.
        self._read: dict[int, tuple] = {}

    def _expr(self, src: Source) -> str:
        known = self._exprs.get(id(src))
        if known is None or known[0] is not src:
            known = self._exprs[id(src)] = (src, src.expr())
        return known[1]

    # -- sources ------------------------------------------------------------------------
    def _step(self, key, op: int, base: int, arg) -> int:
        if key not in self._steps:
            self._steps[key] = len(self.out.steps)
            # Names in dicts (globals, attributes) are interned: an interned key is found by identity.
            self.out.steps.append((op, base, sys.intern(arg) if type(arg) is str else arg))
        return self._steps[key]

    def const(self, obj) -> int:
        return self._step(("const", id(obj)), SRC_CONST, -1, obj)

    def source(self, src: Source | None) -> int | None:
        """The step reading ``src`` (None: a source the program cannot read; its guard goes to Python)."""
        if src is None:
            return None
        known = self._read.get(id(src))
        if known is not None and known[0] is src:
            return known[1]
        step = self._source(src)
        self._read[id(src)] = (src, step)
        return step

    def _source(self, src: Source) -> int | None:
        key = self._expr(src)
        if key in self._steps:
            return self._steps[key]
        t = type(src)
        if t is _Globals:
            return self._step(key, SRC_GLOBALS, -1, None)
        if t is _Constant:
            return self.const(src.obj)
        if t is LocalSource:
            return self._step(key, SRC_LOCAL, -1, src.name)
        if t is GlobalSource:
            return self._step(key, SRC_GLOBAL, -1, src.name)
        if t is ClassSource:
            return self._step(key, SRC_CONST, -1, src.cls)
        if t is ModuleGlobalSource:
            return self._step(key, SRC_ITEM, self.const(src.globals_dict), src.name)
        if t is BuiltinSource:
            return self._step(key, SRC_ITEM, self.const(self.builtins), src.name)
        base = self.source(getattr(src, "base", None))
        if base is None:
            return None
        if t is GenericAttrSource:
            return self._step(key, SRC_GENERIC_ATTR, base, src.name)
        if t is AttrSource:
            return self._step(key, SRC_ATTR, base, src.name)
        if t is DictEntrySource:
            attr = self._step(f"{self._expr(src.base)}.{src.dict_attr}", SRC_ATTR, base, src.dict_attr)
            return self._step(key, SRC_ITEM, attr, src.key)
        if t is ItemSource:
            return self._step(key, SRC_ITEM, base, src.index)
        if t is KeyedItemSource:
            index = self.source(src.key)
            return None if index is None else self._step(key, SRC_KEYED_ITEM, base, index)
        if t is CellContentsSource:
            closure = self._step(f"{self._expr(src.base)}.__closure__", SRC_ATTR, base, "__closure__")
            cell = self._step(f"{self._expr(src.base)}.__closure__[{src.index}]", SRC_ITEM, closure, src.index)
            return self._step(key, SRC_ATTR, cell, "cell_contents")
        if t is DictStorageSource:
            return self._step(key, SRC_DICT_STORAGE, base, src.key)
        if t is _TypeOf:
            return self._step(key, SRC_TYPE, base, None)
        return None

    # -- checks -------------------------------------------------------------------------
    def lower(self, g: Guard) -> None:
        checks = self._checks(g)
        if checks is None:
            self.out.python.append(g)
            return
        for check, line in checks:
            self.out.checks.append(check)
            self.out.lines.append(line)
            op, src, a = check[:3]
            if op == CK_TENSOR:
                self._tensors.add(src)
            elif op in (CK_TYPE, CK_EQ) and a is int:
                self._ints.add(src)

    def _checks(self, g: Guard) -> list | None:
        """``[(check tuple, readable line)]`` for ``g``, or None if the program cannot check it."""
        if g.kind == "SYMBOLIC_SHAPE" and g.op is None:
            return self._symbolic(g)
        op = g.op if g.op is not None else _template_op(g)
        if op is None:
            return None
        kind = op[0]
        if kind == "CALL_IS":
            return [((CK_CALL_IS, -1, op[1], op[2], ()), f"{op[1].__name__}() is {op[2]!r}")]
        if kind == "DISTINCT":
            steps = [self.source(s) for s in op[1]]
            if None in steps:
                return None
            return [((CK_DISTINCT, -1, None, None, tuple(steps)), g.description)]
        if kind == "IN_ANY":
            steps = [self.source(s) for s in op[3]]
            if None in steps:
                return None
            return [((CK_IN_ANY, -1, op[2], None, (int(op[1]), *steps)), g.description)]
        out = []
        for part in (op,) if kind != "ALL" else op[1]:
            check = self._check(part)
            if check is None:
                return None
            out.append(check)
        return out

    def _symbolic(self, g: Guard) -> list | None:
        """A ShapeEnv guard (``2 <= L['x'].size()[0]``, ``a == b*c``) as integer expressions, one per
        conjunct; each keeps its Python version for values past int64."""
        try:
            tree = ast.parse(g.expr, mode="eval").body
        except SyntaxError:
            return None
        parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
        pairs = []
        for part in parts:
            if isinstance(part, ast.Compare):  # a < b < c: a < b and b < c
                operands = [part.left, *part.comparators]
                pairs += [(operands[i], op, operands[i + 1]) for i, op in enumerate(part.ops)]
            else:
                pairs.append((part, None, None))
        out = []
        scope = {**g.constants, "__builtins__": _builtins}
        for left, op, right in pairs:
            code: list = []
            try:
                self._emit(g.expr, left, code)
                if op is not None:
                    if type(op) not in _COMPARE:
                        return None
                    self._emit(g.expr, right, code)
                    code += [_COMPARE[type(op)], 0, 0]
            except _NotLowered:
                return None
            text = ast.get_source_segment(g.expr, left) + (
                "" if op is None else f" {_OPERATOR_TEXT[type(op)]} {ast.get_source_segment(g.expr, right)}")
            python = eval(f"lambda L, G: ({text})", scope)
            out.append(((CK_INT_EXPR, -1, python, None, tuple(code)), text))
        return out

    def _emit(self, text: str, node, code: list) -> None:
        """Instructions pushing the int value of ``node`` (an expression of ``text``), or ``_NotLowered``."""
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value in _INT64:
            code += [IE_CONST, node.value, 0]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            self._emit(text, node.operand, code)
            code += [IE_NEG, 0, 0]
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._emit(text, node.left, code)
            self._emit(text, node.right, code)
            code += [_BINARY[type(node.op)], 0, 0]
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
              and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in ("size", "stride")
              and not node.value.args and not node.value.keywords
              and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int and node.slice.value >= 0):
            step = self._steps.get(ast.get_source_segment(text, node.value.func.value))
            if step not in self._tensors:
                raise _NotLowered
            code += [IE_SIZE if node.value.func.attr == "size" else IE_STRIDE, step, node.slice.value]
        else:
            step = self._steps.get(ast.get_source_segment(text, node))
            if step not in self._ints:
                raise _NotLowered
            code += [IE_INT, step, 0]

    def _check(self, op: tuple):
        kind, src = op[0], self.source(op[1])
        if src is None:
            return None
        where = self._expr(op[1])
        if kind == "TYPE":
            return (CK_TYPE, src, op[2], None, ()), f"type({where}) is {op[2].__qualname__}"
        if kind == "ID":
            return (CK_ID, src, op[2], None, ()), f"{where} is {_shown(op[2])}"
        if kind == "ID_WEAK":
            return (CK_ID_WEAK, src, op[2], None, ()), f"{where} is (weakly) {_shown(op[2]())}"
        if kind == "EQ":
            if type(op[3]) is not op[2]:
                return None
            return (CK_EQ, src, op[2], op[3], ()), f"type({where}) is {op[2].__qualname__} and {where} == {op[3]!r}"
        if kind == "FLOAT_BITS":
            return (CK_FLOAT_BITS, src, op[2], None, ()), f"{where} is the float with bits {op[2].hex()}"
        if kind == "COMPLEX_BITS":
            return (CK_COMPLEX_BITS, src, op[2], None, ()), f"{where} is the complex with bits {op[2].hex()}"
        if kind == "KEYS":
            return (CK_KEYS, src, list(op[2]), None, ()), f"list({where}) == {op[2]!r}"
        if kind in ("SAME", "SAME_KEYS"):
            listed = kind == "SAME_KEYS"
            shown = f"list({where})" if listed else where
            check, fn = (CK_SAME, None) if _c_constant(op[2]) else (CK_CALL_TRUE, same_constant)
            return (check, src, fn, op[2], (int(listed),)), f"same_constant({shown}, {op[2]!r})"
        if kind in ("LEN_EQ", "LEN_GT"):
            return ((CK_LEN_EQ if kind == "LEN_EQ" else CK_LEN_GT), src, None, None, (op[2],)), \
                f"len({where}) {'==' if kind == 'LEN_EQ' else '>'} {op[2]}"
        if kind == "HAS_ATTR":
            return (CK_HAS_ATTR, src, op[2], None, (int(op[3]),)), f"hasattr({where}, {op[2]!r}) is {op[3]}"
        if kind == "IS_SOURCE":
            other = self.source(op[2])
            if other is None:
                return None
            return (CK_IS_SOURCE, src, None, None, (other, int(op[3]))), f"({where} is {op[2].expr()}) is {op[3]}"
        if kind == "IN_SOURCE":
            item = self.source(op[2])
            if item is None:
                return None
            return (CK_IN_SOURCE, src, None, None, (item, int(op[3]))), f"({op[2].expr()} in {where}) is {op[3]}"
        if kind == "FALSY":
            return (CK_FALSY, src, None, None, ()), f"not {where}"
        if kind in ("IN", "NOT_IN"):
            return ((CK_IN if kind == "IN" else CK_NOT_IN), src, op[2], None, ()), \
                f"{op[2]!r} {'in' if kind == 'IN' else 'not in'} {where}"
        if kind == "TENSOR":
            ints = _tensor_ints(op[2])
            if ints is None:
                return None
            return (CK_TENSOR, src, op[2].type, op[2].requires_grad, ints), f"tensor {where} matches {op[2]}"
        return None


def _template_op(g: Guard) -> tuple | None:
    """The check of a guard written elsewhere from a known template (``GuardSet.add``), or None."""
    s, t, obj = g.source, g.template, g.objects
    if t == _MODULE_STATE:
        return ("ALL", [("KEYS", AttrSource(s, "_parameters"), obj["p"]), ("KEYS", AttrSource(s, "_buffers"), obj["b"]),
                        ("KEYS", AttrSource(s, "_modules"), obj["c"]), ("FALSY", AttrSource(s, "_forward_hooks")),
                        ("FALSY", AttrSource(s, "_forward_pre_hooks")), ("FALSY", AttrSource(s, "_backward_hooks")),
                        ("NOT_IN", AttrSource(s, "__dict__"), "forward")])
    if t == _FUNCTION:
        return ("ALL", [("TYPE", s, obj["t"]), ("ID", AttrSource(s, "__code__"), obj["code"]),
                        ("ID", AttrSource(s, "__globals__"), obj["g"])])
    if t == "list({s}) == {keys}" and type(obj.get("keys")) is list:
        return ("KEYS", s, obj["keys"])
    if s is not None and (m := _LENGTH.fullmatch(t)):
        return ("LEN_EQ" if m[1] == "==" else "LEN_GT", s, int(m[2]))
    if s is not None and (m := _NOT_IN_DICT.fullmatch(t)):
        where = AttrSource(s, "__dict__") if m[2].startswith("{s}") else GenericAttrSource(s, "__dict__")
        return ("NOT_IN", where, ast.literal_eval(m[1]))
    if s is not None and (m := _MISSING.fullmatch(t)):
        checks = [("HAS_ATTR", _TypeOf(s), ast.literal_eval(m[3]), False)]
        if m[1] is not None:
            where = AttrSource(s, "__dict__") if m[2].startswith("{s}") else GenericAttrSource(s, "__dict__")
            checks.insert(0, ("NOT_IN", where, ast.literal_eval(m[1])))
        return ("ALL", checks)
    if s is not None and (m := _OWN.fullmatch(t)):
        return ("IN_ANY", m[2] == "True", ast.literal_eval(m[1]),
                [AttrSource(s, a) for a in ("_parameters", "_buffers", "_modules", "__dict__")])
    if s is not None and (m := _CLASS_ATTR.fullmatch(t)):
        return ("ID", AttrSource(_TypeOf(s), m[1]), obj["attr"])
    if s is not None and (m := _ATTR_IS.fullmatch(t)):
        return ("ID", AttrSource(s, m[1]), obj["attr"])
    if s is None and (m := _NAME_IN.fullmatch(t)):
        where = _Globals() if m[3] == "G" else _Constant(obj["g"])
        return ("NOT_IN" if m[2] == "not in" else "IN", where, ast.literal_eval(m[1]))
    return None


def lower(guards: list[Guard], builtins_dict: dict | None = None) -> Lowered:
    builder = _Builder(builtins_dict)
    for g in guards:
        builder.lower(g)
    return builder.out


# -- tensors -----------------------------------------------------------------------------------

#: Tensor types whose metadata the program reads through the shim (their attributes are torch's own).
_SHIM_TYPES = (torch.Tensor, torch.nn.Parameter)
_setup_state: list = []  # [bool] once tried
_codes: dict = {}


def tensors_in_c() -> bool:
    """Whether tensor checks run in C: the shim was found and reads real tensors right (tried once)."""
    if not _setup_state:
        _setup_state.append(_setup())
    return _setup_state[0]


def _setup() -> bool:
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        names = ("dtype", "device_type", "device_index", "dim", "sizes", "strides")
        addresses = tuple(ctypes.cast(getattr(lib, f"aoti_torch_get_{n}"), ctypes.c_void_p).value for n in names)
        _guard_setup(addresses, torch._C.TensorBase.__dict__["requires_grad"], torch._C.TensorBase)
    except (OSError, AttributeError, KeyError, TypeError, ValueError):
        return False
    probes = [torch.randn(2, 3, 5, dtype=torch.float64).transpose(0, 2).requires_grad_(),
              torch.zeros((), dtype=torch.int32), torch.nn.Parameter(torch.ones(4, 1)),
              torch.empty(0, 7, dtype=torch.bool)[:, ::2]]
    seen = {}
    for t in probes:
        dtype, device_type, _, size, stride, requires_grad = _tensor_meta(t)
        if (size, stride, requires_grad) != (tuple(t.shape), t.stride(), t.requires_grad):
            return False
        if seen.setdefault(dtype, t.dtype) is not t.dtype or device_type != 0:
            return False
    return len(seen) == len(probes)


def _tensor_ints(spec: TensorSpec) -> tuple | None:
    """(dtype code, device type, device index or -2 for any CPU tensor, ndim, sizes, strides), or None."""
    if spec.type not in _SHIM_TYPES or not tensors_in_c() or len(spec.size) != len(spec.stride):
        return None
    dtype = _code(("dtype", spec.dtype), lambda: torch.empty(0, dtype=spec.dtype))
    device = _code(("device", spec.device), lambda: torch.empty(0, device=spec.device))
    if dtype is None or device is None:
        return None
    index = -2 if spec.device.type == "cpu" else (-1 if spec.device.index is None else spec.device.index)
    return (dtype[0], device[1], index, len(spec.size), *spec.size, *spec.stride)


def _code(key, probe):
    if key not in _codes:
        try:
            _codes[key] = _tensor_meta(probe())
        except Exception:  # a dtype or device torch cannot make a tensor of: Python checks it
            _codes[key] = None
    return _codes[key]


def _shown(obj) -> str:
    return repr(obj) if obj is None or type(obj) in (bool, int, str) else _short(obj)
