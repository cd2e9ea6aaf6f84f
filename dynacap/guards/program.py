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
import functools
import os
import re
import sys
from dataclasses import dataclass

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


class Lowered:
    """A guard list as program data: ``steps``/``checks`` for ``_C.GuardProgram``, the guards left to Python.

    ``lines()`` (one readable line per check) is made when asked for (logs, tests): a large model's
    program has thousands of checks and is mostly never shown.
    """

    def __init__(self):
        self.steps: list = []
        self.checks: list = []
        self.python: list = []  # guards the program leaves to its Python fallback
        #: Per guard the program checks, in order: the guard (its lines are its parts') or its lines.
        self.shown: list = []

    def lines(self) -> list[str]:
        out = []
        for item in self.shown:
            out += item if type(item) is list else _lines(item)
        return out


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


#: The attributes ``_MODULE_STATE`` reads, in the order of its checks.
_MODULE_ATTRS = ("_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                 "__dict__")
#: Step arguments compared by value in a step's key: any other (``True`` beside ``1``, ``-0.0`` beside
#: ``0.0``) by its repr, as the source's expression shows it.
_PLAIN_ARGS = (str, int)


class _Builder:
    def __init__(self, builtins_dict: dict | None):
        self.out = Lowered()
        self.builtins = builtins_dict if builtins_dict is not None else _builtins.__dict__
        #: A step's key (what it reads from which earlier step) -> its index.  Two sources with the same
        #: expression read the same step, and a step is found without that expression.
        self._steps: dict = {}
        # Steps the program has checked before any symbolic-shape guard (which come last), by the
        # expression of their source: exact tensors read through the shim, exact ints.
        self._tensors: dict[str, int] = {}
        self._ints: dict[str, int] = {}
        #: id(source) -> (source, its step or None): a source object read again (a module's, by each of
        #: its guards) finds its step at once.  Sources are immutable and each is held here, so the id
        #: names that one source while the builder lives.
        self._read: dict[int, tuple] = {}

    # -- sources ------------------------------------------------------------------------
    def _step(self, key, op: int, base: int, arg) -> int:
        step = self._steps.get(key)
        if step is None:
            step = self._steps[key] = len(self.out.steps)
            # Names in dicts (globals, attributes) are interned: an interned key is found by identity.
            self.out.steps.append((op, base, sys.intern(arg) if type(arg) is str else arg))
        return step

    def _attr(self, base: int, name: str, op: int = SRC_ATTR) -> int:
        step = self._steps.get((op, base, name))
        return self._step((op, base, name), op, base, name) if step is None else step

    def _keyed(self, op: int, base: int, arg) -> int:
        """A step reading ``arg`` (a constant key or index) from ``base``."""
        key = (op, base, arg) if type(arg) in _PLAIN_ARGS else (op, base, None, repr(arg))
        return self._step(key, op, base, arg)

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
        t = type(src)
        if t is LocalSource:
            return self._step((SRC_LOCAL, -1, src.name), SRC_LOCAL, -1, src.name)
        if t is GlobalSource:
            return self._step((SRC_GLOBAL, -1, src.name), SRC_GLOBAL, -1, src.name)
        if t is _Globals:
            return self._step((SRC_GLOBALS, -1, None), SRC_GLOBALS, -1, None)
        if t is _Constant:
            return self.const(src.obj)
        if t is ClassSource:
            return self._step(("class", id(src.cls)), SRC_CONST, -1, src.cls)
        if t is ModuleGlobalSource:
            return self._keyed(SRC_ITEM, self.const(src.globals_dict), src.name)
        if t is BuiltinSource:
            return self._keyed(SRC_ITEM, self.const(self.builtins), src.name)
        base = self.source(getattr(src, "base", None))
        if base is None:
            return None
        if t is AttrSource:
            return self._attr(base, src.name)
        if t is GenericAttrSource:
            return self._attr(base, src.name, SRC_GENERIC_ATTR)
        if t is DictEntrySource:
            return self._keyed(SRC_ITEM, self._attr(base, src.dict_attr), src.key)
        if t is ItemSource:
            return self._keyed(SRC_ITEM, base, src.index)
        if t is KeyedItemSource:
            index = self.source(src.key)
            return None if index is None else self._step((SRC_KEYED_ITEM, base, index), SRC_KEYED_ITEM, base, index)
        if t is CellContentsSource:
            cell = self._keyed(SRC_ITEM, self._attr(base, "__closure__"), src.index)
            return self._attr(cell, "cell_contents")
        if t is DictStorageSource:
            return self._keyed(SRC_DICT_STORAGE, base, src.key)
        if t is _TypeOf:
            return self._step((SRC_TYPE, base, None), SRC_TYPE, base, None)
        return None

    # -- checks -------------------------------------------------------------------------
    def lower(self, g: Guard) -> None:
        op = g.op
        if op is None:
            if g.kind == "SYMBOLIC_SHAPE":
                checks = self._symbolic(g)
                if checks is None:
                    self.out.python.append(g)
                else:
                    self.out.checks += [check for check, _ in checks]
                    self.out.shown.append([line for _, line in checks])
                return
            if g.template == _MODULE_STATE:
                self._module_state(g)
                return
            op = _template_op(g)
            if op is None:
                self.out.python.append(g)
                return
        if op[0] == "ALL":
            checks = []
            for part in op[1]:
                check = self._check(part)
                if check is None:
                    self.out.python.append(g)
                    return
                checks.append(check)
            for part, check in zip(op[1], checks):
                self._checked(part, check)
            self.out.checks += checks
        else:
            check = self._check(op)
            if check is None:
                self.out.python.append(g)
                return
            if check[2] is int or check[0] == CK_TENSOR:
                self._checked(op, check)
            self.out.checks.append(check)
        self.out.shown.append(g)

    def _checked(self, op: tuple, check: tuple) -> None:
        """Note the steps a symbolic-shape guard may read as exact tensors or ints."""
        if check[0] == CK_TENSOR:
            self._tensors[op[1].expr()] = check[1]
        elif check[2] is int and check[0] in (CK_TYPE, CK_EQ):
            self._ints[op[1].expr()] = check[1]

    def _module_state(self, g: Guard) -> None:
        """values/module.py's ``_MODULE_STATE`` template: the checks of its seven parts (``_template_op``'s,
        which ``_lines`` shows), made here from the module's step."""
        base = self.source(g.source)
        if base is None:
            self.out.python.append(g)
            return
        objects, steps, made = g.objects, self._steps, self.out.steps
        # The attribute steps are found or made here, not one call each: a model has one such guard
        # per module.  (The names are interned already, as ``_step`` would make them.)
        reads = []
        for name in _MODULE_ATTRS:
            key = (SRC_ATTR, base, name)
            step = steps.get(key)
            if step is None:
                step = steps[key] = len(made)
                made.append(key)
            reads.append(step)
        params, buffers, modules, forward_hooks, pre_hooks, backward_hooks, instance_dict = reads
        self.out.checks += [
            (CK_KEYS, params, list(objects["p"]), None, ()),
            (CK_KEYS, buffers, list(objects["b"]), None, ()),
            (CK_KEYS, modules, list(objects["c"]), None, ()),
            (CK_FALSY, forward_hooks, None, None, ()),
            (CK_FALSY, pre_hooks, None, None, ()),
            (CK_FALSY, backward_hooks, None, None, ()),
            (CK_NOT_IN, instance_dict, "forward", None, ()),
        ]
        self.out.shown.append(g)

    def _check(self, op: tuple) -> tuple | None:
        """The check tuple of one part of a guard (``Guard.op``), or None if the program cannot check it."""
        kind = op[0]
        if kind == "CALL_IS":
            return CK_CALL_IS, -1, op[1], op[2], ()
        if kind == "DISTINCT":
            steps = [self.source(s) for s in op[1]]
            return None if None in steps else (CK_DISTINCT, -1, None, None, tuple(steps))
        if kind == "IN_ANY":
            steps = [self.source(s) for s in op[3]]
            return None if None in steps else (CK_IN_ANY, -1, op[2], None, (int(op[1]), *steps))
        known = self._read.get(id(op[1]))  # ``source``'s memo, looked up here: most guards' source was read before
        src = known[1] if known is not None and known[0] is op[1] else self.source(op[1])
        if src is None:
            return None
        if kind == "TYPE":
            return CK_TYPE, src, op[2], None, ()
        if kind == "ID":
            return CK_ID, src, op[2], None, ()
        if kind == "ID_WEAK":
            return CK_ID_WEAK, src, op[2], None, ()
        if kind == "EQ":
            return None if type(op[3]) is not op[2] else (CK_EQ, src, op[2], op[3], ())
        if kind == "FLOAT_BITS":
            return CK_FLOAT_BITS, src, op[2], None, ()
        if kind == "COMPLEX_BITS":
            return CK_COMPLEX_BITS, src, op[2], None, ()
        if kind == "KEYS":
            return CK_KEYS, src, list(op[2]), None, ()
        if kind in ("SAME", "SAME_KEYS"):
            check, fn = (CK_SAME, None) if _c_constant(op[2]) else (CK_CALL_TRUE, same_constant)
            return check, src, fn, op[2], (int(kind == "SAME_KEYS"),)
        if kind in ("LEN_EQ", "LEN_GT"):
            return (CK_LEN_EQ if kind == "LEN_EQ" else CK_LEN_GT), src, None, None, (op[2],)
        if kind == "HAS_ATTR":
            return CK_HAS_ATTR, src, op[2], None, (int(op[3]),)
        if kind == "IS_SOURCE":
            other = self.source(op[2])
            return None if other is None else (CK_IS_SOURCE, src, None, None, (other, int(op[3])))
        if kind == "IN_SOURCE":
            item = self.source(op[2])
            return None if item is None else (CK_IN_SOURCE, src, None, None, (item, int(op[3])))
        if kind == "FALSY":
            return CK_FALSY, src, None, None, ()
        if kind in ("IN", "NOT_IN"):
            return (CK_IN if kind == "IN" else CK_NOT_IN), src, op[2], None, ()
        if kind == "TENSOR":
            ints = _tensor_ints(op[2])
            return None if ints is None else (CK_TENSOR, src, op[2].type, op[2].requires_grad, ints)
        return None

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
            step = self._tensors.get(ast.get_source_segment(text, node.value.func.value))
            if step is None:
                raise _NotLowered
            code += [IE_SIZE if node.value.func.attr == "size" else IE_STRIDE, step, node.slice.value]
        else:
            step = self._ints.get(ast.get_source_segment(text, node))
            if step is None:
                raise _NotLowered
            code += [IE_INT, step, 0]

def _template_op(g: Guard) -> tuple | None:
    """The check of a guard written elsewhere from a known template (``GuardSet.add``), or None."""
    plan = _plan(g.template)
    if plan is None:
        return None
    wants_source, make = plan
    if wants_source is not None and wants_source is not (g.source is not None):
        return None
    return make(g.source, g.objects)


def _dict_of(s: Source, written: str) -> Source:
    """The instance dict a template reads: ``{s}.__dict__`` or ``object.__getattribute__({s}, '__dict__')``."""
    return AttrSource(s, "__dict__") if written.startswith("{s}") else GenericAttrSource(s, "__dict__")


@functools.lru_cache(maxsize=4096)
def _plan(t: str):
    """How to make the check of template ``t``: (whether it needs a source (None: either way), a function of the
    guard's source and objects), or None: a template this module does not know.  Parsed once per template."""
    if t == _MODULE_STATE:
        return None, lambda s, obj: ("ALL", [
            ("KEYS", AttrSource(s, "_parameters"), obj["p"]), ("KEYS", AttrSource(s, "_buffers"), obj["b"]),
            ("KEYS", AttrSource(s, "_modules"), obj["c"]), ("FALSY", AttrSource(s, "_forward_hooks")),
            ("FALSY", AttrSource(s, "_forward_pre_hooks")), ("FALSY", AttrSource(s, "_backward_hooks")),
            ("NOT_IN", AttrSource(s, "__dict__"), "forward")])
    if t == _FUNCTION:
        return None, lambda s, obj: ("ALL", [("TYPE", s, obj["t"]), ("ID", AttrSource(s, "__code__"), obj["code"]),
                                             ("ID", AttrSource(s, "__globals__"), obj["g"])])
    if t == "list({s}) == {keys}":
        return None, lambda s, obj: ("KEYS", s, obj["keys"]) if type(obj.get("keys")) is list else None
    if m := _LENGTH.fullmatch(t):
        kind, n = "LEN_EQ" if m[1] == "==" else "LEN_GT", int(m[2])
        return True, lambda s, obj: (kind, s, n)
    if m := _NOT_IN_DICT.fullmatch(t):
        name, written = ast.literal_eval(m[1]), m[2]
        return True, lambda s, obj: ("NOT_IN", _dict_of(s, written), name)
    if m := _MISSING.fullmatch(t):
        attr, name, written = ast.literal_eval(m[3]), m[1] and ast.literal_eval(m[1]), m[2]
        if name is None:
            return True, lambda s, obj: ("ALL", [("HAS_ATTR", _TypeOf(s), attr, False)])
        return True, lambda s, obj: ("ALL", [("NOT_IN", _dict_of(s, written), name),
                                             ("HAS_ATTR", _TypeOf(s), attr, False)])
    if m := _OWN.fullmatch(t):
        own, name = m[2] == "True", ast.literal_eval(m[1])
        return True, lambda s, obj: ("IN_ANY", own, name,
                                     [AttrSource(s, a) for a in ("_parameters", "_buffers", "_modules", "__dict__")])
    if m := _CLASS_ATTR.fullmatch(t):
        attr = m[1]
        return True, lambda s, obj: ("ID", AttrSource(_TypeOf(s), attr), obj["attr"])
    if m := _ATTR_IS.fullmatch(t):
        attr = m[1]
        return True, lambda s, obj: ("ID", AttrSource(s, attr), obj["attr"])
    if m := _NAME_IN.fullmatch(t):
        kind, name, in_frame = "NOT_IN" if m[2] == "not in" else "IN", ast.literal_eval(m[1]), m[3] == "G"
        return False, lambda s, obj: (kind, _Globals() if in_frame else _Constant(obj["g"]), name)
    return None


def _lines(g: Guard) -> list[str]:
    """The readable lines of the checks of ``g``, a guard the program checks (``Lowered.lines``)."""
    op = g.op if g.op is not None else _template_op(g)
    kind = op[0]
    if kind == "CALL_IS":
        return [f"{op[1].__name__}() is {op[2]!r}"]
    if kind in ("DISTINCT", "IN_ANY"):
        return [g.description]
    return [_line(part) for part in ((op,) if kind != "ALL" else op[1])]


def _line(op: tuple) -> str:
    kind, where = op[0], op[1].expr()
    if kind == "TYPE":
        return f"type({where}) is {op[2].__qualname__}"
    if kind == "ID":
        return f"{where} is {_shown(op[2])}"
    if kind == "ID_WEAK":
        return f"{where} is (weakly) {_shown(op[2]())}"
    if kind == "EQ":
        return f"type({where}) is {op[2].__qualname__} and {where} == {op[3]!r}"
    if kind == "FLOAT_BITS":
        return f"{where} is the float with bits {op[2].hex()}"
    if kind == "COMPLEX_BITS":
        return f"{where} is the complex with bits {op[2].hex()}"
    if kind == "KEYS":
        return f"list({where}) == {op[2]!r}"
    if kind in ("SAME", "SAME_KEYS"):
        return f"same_constant({f'list({where})' if kind == 'SAME_KEYS' else where}, {op[2]!r})"
    if kind in ("LEN_EQ", "LEN_GT"):
        return f"len({where}) {'==' if kind == 'LEN_EQ' else '>'} {op[2]}"
    if kind == "HAS_ATTR":
        return f"hasattr({where}, {op[2]!r}) is {op[3]}"
    if kind == "IS_SOURCE":
        return f"({where} is {op[2].expr()}) is {op[3]}"
    if kind == "IN_SOURCE":
        return f"({op[2].expr()} in {where}) is {op[3]}"
    if kind == "FALSY":
        return f"not {where}"
    if kind in ("IN", "NOT_IN"):
        return f"{op[2]!r} {'in' if kind == 'IN' else 'not in'} {where}"
    assert kind == "TENSOR", kind
    return f"tensor {where} matches {op[2]}"


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
_heads: dict = {}  # (dtype, device) -> ``_head``


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
    key = (spec.dtype, spec.device)
    head = _heads.get(key)
    if head is None:
        head = _heads[key] = _head(spec)
    return None if head is False else (*head, len(spec.size), *spec.size, *spec.stride)


def _head(spec: TensorSpec) -> tuple | bool:
    """(dtype code, device type, device index) of ``spec``, or False: Python checks its tensors."""
    dtype = _code(("dtype", spec.dtype), lambda: torch.empty(0, dtype=spec.dtype))
    device = _code(("device", spec.device), lambda: torch.empty(0, device=spec.device))
    if dtype is None or device is None:
        return False
    index = -2 if spec.device.type == "cpu" else (-1 if spec.device.index is None else spec.device.index)
    return dtype[0], device[1], index


def _code(key, probe):
    if key not in _codes:
        try:
            _codes[key] = _tensor_meta(probe())
        except Exception:  # a dtype or device torch cannot make a tensor of: Python checks it
            _codes[key] = None
    return _codes[key]


def _shown(obj) -> str:
    return repr(obj) if obj is None or type(obj) in (bool, int, str) else _short(obj)
