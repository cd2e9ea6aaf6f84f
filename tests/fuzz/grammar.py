"""Seeded grammar that writes the Python source of one random fuzz program.

A program is a module: ``import torch``, a few globals (``G_COUNT``,
``G_LIST``, ``G_SCALE``, ``G_SET``), module-level helpers (recursive, generator,
varargs) and the entry point

    def fn(x, y, xs, d, obj, buf, k): ...

whose arguments are made by ``fuzz.inputs`` (tensors ``x``/``y`` of one shape,
a list ``xs`` of such tensors, a dict ``d`` with ``"a"`` (tensor) and ``"n"``
(int), an object ``obj`` with ``w``/``count``/``log``, an ``io.StringIO``
``buf`` and a Python number ``k``).  Every generated program is valid Python
and runs eagerly; most return normally, some raise on purpose.

Every feature is a *production*: a statement generator registered with a
weight in ``STATEMENTS`` (``@statement("name", weight)``).  To add a feature,
write a method taking ``(self, scope, depth)`` that returns source lines and
register it; ``generate(seed, exclude=...)`` can switch productions off by
name.  ``GRAMMARS`` names the grammar's versions: ``v1`` is the grammar before
the objects/sets/exceptions/stdlib families (issue 8), kept selectable for
like-for-like figures (``exclusions_for("v1")`` switches off every later
production; with them off a seed writes the same program as before).  Expressions come from small weighted tables in ``Writer``.

This module only writes text: it never runs the programs (see ``runner``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

#: Tensor arguments and the other names the entry point receives.
ARGS = ("x", "y", "xs", "d", "obj", "buf", "k")
ENTRY = "fn"

HEADER = """\
import collections
import itertools

import torch

G_COUNT = 0
G_LIST = []
G_SCALE = 1.5
G_LAST = None
G_SET = {1, 2}
LAYERS = torch.nn.ModuleDict({"ident": torch.nn.Identity(), "drop": torch.nn.Dropout(0.25),
                              "relu": torch.nn.ReLU(inplace=True)}).eval()


class Box:
    def __init__(self, v, s=1):
        self.v = v
        self.s = s

    def get(self):
        return self.v * self.s

    def bump(self, n=1):
        self.s = self.s + n
        return self
"""

#: name -> (weight, method); filled by ``@statement``.
STATEMENTS: dict[str, tuple[float, object]] = {}
#: Features chosen inside expressions (can be excluded like productions).
EXPRESSION_FEATURES = {
    "item": "a tensor's .item() read into a Python number (graph break)",
    "tensor_branch": "an if/while condition on a tensor value (graph break)",
    "bool_k": "the argument k is True in some call (not a production: see inputs.make_args)",
}


#: The statement productions of grammar v1 (every later one is switched off to write a v1 program).
V1_STATEMENTS = frozenset("""
    assign_tensor assign_num assign_scalar augassign inplace_method list_local list_mutate dict_mutate obj_attr
    global_write print_buf print_stdout if_else for_range for_list while_loop loop_exit no_grad try_except raise_if
    early_return raising_op unpack comprehension nested_function lambda closure_nonlocal cell_after_break
    recursive_helper varargs_helper generator del_local del_arg locals_read defaultdict_group ordered_dict chain_zip
    box_object set_numbers set_tensors global_set match_stmt""".split())
GRAMMARS = ("full", "v1")


def statement(name: str, weight: float):
    """Register a statement production under ``name`` with a selection ``weight``."""
    def register(method):
        STATEMENTS[name] = (weight, method)
        return method
    return register


@dataclass
class Program:
    """One generated program: its seed, source text and the productions it used."""

    seed: int
    source: str
    features: set[str] = field(default_factory=set)


class Scope:
    """Names visible at one point of the generated code, by kind.

    ``own`` are the names the current function may assign (its parameters and
    locals); other visible names are closure variables, read-only in a nested
    function (assigning one there would make it a local).
    """

    KINDS = ("tensor", "scalar", "num", "list", "dict")

    def __init__(self, parent: "Scope | None" = None, *, new_function: bool = False):
        self.names: dict[str, str] = dict(parent.names) if parent else {}
        self.own: set[str] = set() if new_function or parent is None else set(parent.own)
        self.block: set[str] = set()  # defined in this very block (safe to del)
        self.in_loop = False if new_function or parent is None else parent.in_loop
        # Lists not to mutate: those being iterated over, and in a nested function every list of the
        # enclosing one (it may be called from inside a loop over that list).
        self.frozen: set[str] = set(parent.frozen) if parent else set()
        if parent is not None and new_function:
            self.frozen |= {n for n, kind in parent.names.items() if kind == "list"}
        self.function = parent.function if parent and not new_function else None

    def child(self) -> "Scope":
        return Scope(self)

    def define(self, name: str, kind: str) -> None:
        self.names[name] = kind
        self.own.add(name)
        self.block.add(name)

    def of(self, kind: str, *, assignable: bool = False) -> list[str]:
        return [n for n, k in self.names.items() if k == kind and (not assignable or n in self.own)]

    def forget(self, name: str) -> None:
        self.names.pop(name, None)
        self.own.discard(name)
        self.block.discard(name)


class FunctionState:
    """Per generated function: globals it writes (declared at its top) and names closures read."""

    def __init__(self, name: str):
        self.name = name
        self.global_writes: set[str] = set()
        self.captured: set[str] = set()


class Writer:
    """Writes one program from a ``random.Random``; the methods are the grammar."""

    MAX_DEPTH = 2

    def __init__(self, seed: int, exclude=(), *, size: int = 5):
        unknown = set(exclude) - set(STATEMENTS) - set(EXPRESSION_FEATURES)
        if unknown:
            raise ValueError(f"unknown productions {sorted(unknown)}; known: {sorted(STATEMENTS)}")
        self.rng = random.Random(seed)
        self.seed = seed
        self.exclude = set(exclude)
        self.size = size
        self.counter = 0
        self.features: set[str] = set()
        self.module_lines: list[str] = []  # module-level helpers, written before fn
        self.module_helpers: dict[str, str] = {}  # helper kind -> name (one of each)
        self.productions = [(n, w, m) for n, (w, m) in STATEMENTS.items() if n not in self.exclude and w > 0]

    # -- utilities -------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def pick(self, table):
        """``table``: list of (weight, value); returns a value (calls it if callable)."""
        total = sum(w for w, _ in table)
        r = self.rng.uniform(0, total)
        for w, value in table:
            r -= w
            if r <= 0:
                return value() if callable(value) else value
        value = table[-1][1]
        return value() if callable(value) else value

    def use(self, feature: str) -> None:
        self.features.add(feature)

    def allowed(self, name: str) -> bool:
        return name not in self.exclude

    # -- expressions -----------------------------------------------------------------
    def tensor(self, scope: Scope, depth: int = 0) -> str:
        """An expression whose value is a tensor of the shape of ``x``."""
        names = scope.of("tensor")
        leaf = lambda: self.rng.choice(names)  # noqa: E731
        if depth >= 2:
            return leaf()
        sub = lambda: self.tensor(scope, depth + 1)  # noqa: E731
        table = [
            (5, leaf),
            (2, lambda: f"torch.{self.rng.choice(['sin', 'cos', 'tanh', 'relu', 'sigmoid', 'abs'])}({sub()})"),
            (2, lambda: f"{sub()}.{self.rng.choice(['neg', 'exp', 'relu', 'square', 'clone'])}()"),
            (3, lambda: f"({sub()} {self.rng.choice(['+', '-', '*'])} {sub()})"),
            (2, lambda: f"({sub()} {self.rng.choice(['+', '-', '*', '/'])} {self.num(scope, 2)})"),
            (1, lambda: f"({sub()} * {self.scalar(scope, depth + 1)})"),
            (1, lambda: f"torch.where({sub()} > 0, {sub()}, {sub()})"),
            (1, lambda: f"{sub()}.clamp(-1.0, 1.0)"),
            (1, lambda: "(xs[0] if xs else x)" if "xs" in scope.names else leaf()),
            (1, lambda: 'd.get("a", x)' if "d" in scope.names and "x" in scope.names else leaf()),
            (1, lambda: "obj.w" if "obj" in scope.names else leaf()),
            (0.5, lambda: f"({sub()} * G_SCALE)"),
            (0.5, lambda: f"torch.stack([{sub()}, {sub()}]).sum(0)"),
            (0.5, lambda: f"{sub()}.flip(0)"),
        ]
        helpers = [n for n, kind in scope.names.items() if kind == "fn_tensor"]
        if helpers:
            table.append((2, lambda: f"{self.rng.choice(helpers)}({sub()})"))
        return self.pick(table)

    def scalar(self, scope: Scope, depth: int = 0) -> str:
        """An expression whose value is a 0-d tensor."""
        names = scope.of("scalar")
        table = [
            (3, lambda: f"{self.tensor(scope, depth + 1)}.{self.rng.choice(['sum', 'mean', 'amax', 'amin'])}()"),
            (1, lambda: f"{self.tensor(scope, depth + 1)}.abs().sum()"),
            (1, lambda: f"(x * y).sum()" if {"x", "y"} <= set(scope.names) else "torch.tensor(1.0)"),
        ]
        if names:
            table.append((3, lambda: self.rng.choice(names)))
        return self.pick(table)

    def num(self, scope: Scope, depth: int = 0) -> str:
        """An expression whose value is a Python number (never a tensor)."""
        names = scope.of("num")
        literal = lambda: self.rng.choice(["0", "1", "2", "3", "-1", "0.5", "1.5", "-2.0"])  # noqa: E731
        if depth >= 2:
            return self.rng.choice(names) if names and self.rng.random() < 0.5 else literal()
        sub = lambda: self.num(scope, depth + 1)  # noqa: E731
        table = [(3, literal), (1, lambda: f"({sub()} {self.rng.choice(['+', '-', '*'])} {sub()})"),
                 (1, lambda: f"max({sub()}, {sub()})"), (0.5, lambda: f"abs({sub()})"),
                 (0.5, lambda: f"int({sub()})")]
        if names:
            table.append((4, lambda: self.rng.choice(names)))
        if "k" in scope.names:
            table.append((2, "k"))
        if "xs" in scope.names:
            table.append((1, "len(xs)"))
        if "x" in scope.names:
            table.append((1, lambda: self.rng.choice(["x.shape[0]", "x.shape[-1]", "x.dim()", "x.numel()"])))
        if "obj" in scope.names:
            table.append((1, "obj.count"))
        if "d" in scope.names:
            table.append((1, 'd.get("n", 0)'))
        table.append((0.5, "G_COUNT"))
        table.append((0.5, "len(G_LIST)"))
        if self.allowed("item"):
            table.append((1, lambda: self.featured("item", f"round({self.scalar(scope, depth + 1)}.item(), 2)")))
        helpers = [n for n, kind in scope.names.items() if kind == "fn_num"]
        if helpers:
            table.append((1, lambda: f"{self.rng.choice(helpers)}()"))
        return self.pick(table)

    def featured(self, feature: str, text: str) -> str:
        self.use(feature)
        return text

    def condition(self, scope: Scope, *, tensor_ok: bool = True) -> str:
        """A Python ``bool`` condition; tensor-valued ones (graph breaks) only when allowed."""
        table = [
            (3, lambda: f"{self.num(scope, 1)} {self.rng.choice(['>', '<', '==', '>=', '!='])} {self.num(scope, 1)}"),
            (1, "len(xs) > 1" if "xs" in scope.names else "True"),
            (1, '"a" in d' if "d" in scope.names else "False"),
            (1, "isinstance(k, int)" if "k" in scope.names else "True"),
            (1, "x.dtype == torch.float64" if "x" in scope.names else "False"),
            (0.5, "x.is_contiguous()" if "x" in scope.names else "True"),
        ]
        if tensor_ok and self.allowed("tensor_branch"):
            table.append((2, lambda: self.featured(
                "tensor_branch", f"{self.scalar(scope, 1)} {self.rng.choice(['>', '<'])} {self.num(scope, 2)}")))
        return self.pick(table)

    def value(self, scope: Scope) -> str:
        """Any value worth returning or storing."""
        table = [(3, lambda: self.tensor(scope)), (2, lambda: self.num(scope)), (1, lambda: self.scalar(scope))]
        for kind in ("list", "dict"):
            names = scope.of(kind)
            if names:
                table.append((1, lambda names=names: self.rng.choice(names)))
        return self.pick(table)

    # -- blocks ----------------------------------------------------------------------
    def block(self, scope: Scope, depth: int, count: int) -> list[str]:
        lines: list[str] = []
        for _ in range(count):
            lines += self.stmt(scope, depth)
        return lines or ["pass"]

    def stmt(self, scope: Scope, depth: int) -> list[str]:
        for _ in range(20):
            name, _, method = self.pick([(w, (n, w, m)) for n, w, m in self.productions])
            lines = method(self, scope, depth)
            if lines is not None:
                self.use(name)
                return lines
        return [f"{self.fresh('n')} = 0"]

    @staticmethod
    def indent(lines: list[str]) -> list[str]:
        return ["    " + line for line in lines]

    def sub_block(self, scope: Scope, depth: int, *, loop: bool = False, frozen=()) -> list[str]:
        child = scope.child()
        child.in_loop = child.in_loop or loop
        child.frozen |= set(frozen)
        return self.indent(self.block(child, depth + 1, self.rng.randint(1, 2)))

    def function(self, name: str, params: list[tuple[str, str]], parent: Scope | None, depth: int,
                 count: int, tail=None) -> tuple[list[str], Scope]:
        """``def name(params): body``; ``params``: (name, kind) pairs; ``tail(scope)`` writes the last lines."""
        scope = Scope(parent, new_function=True)
        outer_function = parent.function if parent is not None else None
        scope.function = FunctionState(name)
        for p, kind in params:
            scope.define(p, kind)
        body = self.block(scope, depth, count)
        if tail is not None:
            body += tail(scope)
        if parent is not None:  # names of the enclosing functions this one reads become cells
            for n in parent.names:
                if n not in scope.own and outer_function is not None:
                    outer_function.captured.add(n)
        header = []
        if scope.function.global_writes:
            header.append("global " + ", ".join(sorted(scope.function.global_writes)))
        lines = [f"def {name}({', '.join(p for p, _ in params)}):"] + self.indent(header + body)
        scope.function = outer_function
        return lines, scope

    def ret(self, scope: Scope) -> list[str]:
        shape = self.rng.random()
        values = [self.value(scope) for _ in range(self.rng.randint(1, 3))]
        if shape < 0.6:
            return [f"return ({', '.join(values)},)"]
        if shape < 0.8:
            return ["return {" + ", ".join(f'"r{i}": {v}' for i, v in enumerate(values)) + "}"]
        return [f"return {values[0]}"]

    # -- the program -----------------------------------------------------------------
    def program(self) -> Program:
        scope = Scope()
        for name, kind in zip(ARGS, ("tensor", "tensor", "list", "dict", "obj", "buf", "num")):
            scope.define(name, kind)
        fn_lines, _ = self.function_with_scope(scope)
        source = HEADER + "\n" + "".join(line + "\n" for line in self.module_lines) + "\n" \
            + "".join(line + "\n" for line in fn_lines)
        return Program(self.seed, source, set(self.features))

    def function_with_scope(self, scope: Scope):
        scope.function = FunctionState(ENTRY)
        body = self.block(scope, 0, self.size) + self.ret(scope)
        header = []
        if scope.function.global_writes:
            header.append("global " + ", ".join(sorted(scope.function.global_writes)))
        return [f"def {ENTRY}({', '.join(ARGS)}):"] + self.indent(header + body), scope


def generate(seed: int, exclude=(), *, size: int = 5) -> Program:
    """The program of ``seed`` (deterministic), without the productions named in ``exclude``."""
    from . import productions  # noqa: F401  (registers the statement productions)

    return Writer(seed, exclude, size=size).program()


def exclusions_for(grammar: str) -> list[str]:
    """The productions to switch off to write programs of ``grammar`` (one of ``GRAMMARS``)."""
    from . import productions  # noqa: F401

    if grammar == "full":
        return []
    if grammar == "v1":
        return sorted(set(STATEMENTS) - V1_STATEMENTS)
    raise ValueError(f"unknown grammar {grammar!r}; known: {', '.join(GRAMMARS)}")


def production_names() -> list[str]:
    from . import productions  # noqa: F401

    return sorted(set(STATEMENTS) | set(EXPRESSION_FEATURES))
