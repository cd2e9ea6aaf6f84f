"""Fuzz productions for the object model (issue 8 item 2): user classes made and used in the program.

The classes are module-level helpers, written into the program the first
time a production uses them (``define``), so programs without these
productions keep their v1 text: ``Acc`` (``__init__``, attributes, methods,
a property with a setter (``Acc2`` replaces its getter), class attributes, ``staticmethod``/``classmethod``
and dunder operators: ``+``/``+=``/``*``/``==``/``len``/``bool``/``[]``/
``iter``/``in``/``call``), ``Acc2(Acc)`` (overrides calling ``super()``),
a dataclass ``Pt`` and a frozen one ``Key`` (hashable: a dict key, a set
member), a namedtuple ``Pair``, ``Dims(tuple)`` and ``Out(dict)`` (the
``ModelOutput`` pattern: items read as attributes), ``Slotted``
(``__slots__``); ``bound_method`` reads a bound method's ``__self__``/``__func__``/``__name__`` and
compares bound methods; ``type_table`` reads ``KINDS``, a table keyed by classes, an ABC and typing
forms (huggingface_hub's validators), sometimes changing it; ``local_class`` writes ``class`` statements inside the function (methods reading its
locals, a subclass calling ``super()``, a class made by ``type()``), ``local_dataclass`` a dataclass there.  Objects are made in the function, changed, read back into
tensors and numbers, and some escape (``G_LAST``, ``obj.log``, the result)
so that their state is compared after the call (``runner.snapshot``).
Registered by importing this module (``productions`` does).
"""
from __future__ import annotations

from .grammar import statement

CLASSES = {
    "acc": '''
class Acc:
    scale = 2

    def __init__(self, t, n=0):
        self.t = t
        self.n = n
        self.hist = []

    @property
    def double(self):
        return self.t * self.scale

    @double.setter
    def double(self, v):
        self.t = v / self.scale

    def add(self, v):
        self.t = self.t + v
        self.n += 1
        self.hist.append(self.n)
        return self

    @staticmethod
    def make(t):
        return Acc(t, 1)

    @classmethod
    def zero(cls, like):
        return cls(like * 0)

    def __add__(self, other):
        if isinstance(other, Acc):
            return type(self)(self.t + other.t, self.n + other.n)
        return type(self)(self.t + other, self.n)

    def __radd__(self, other):
        return self.__add__(other)

    def __iadd__(self, other):
        return self.add(other)

    def __mul__(self, k):
        return type(self)(self.t * k, self.n)

    def __eq__(self, other):
        return isinstance(other, Acc) and self.n == other.n

    def __len__(self):
        return len(self.hist)

    def __bool__(self):
        return self.n > 0

    def __getitem__(self, i):
        return self.hist[i]

    def __iter__(self):
        return iter(self.hist)

    def __contains__(self, v):
        return v in self.hist

    def __call__(self, v):
        return self.t * v + self.n


class Acc2(Acc):
    scale = 3

    def add(self, v):
        super().add(v * 2)
        self.hist.append(-1)
        return self

    @Acc.double.getter
    def double(self):
        return super().double + 1
''',
    "pt": '''
import dataclasses


@dataclasses.dataclass
class Pt:
    t: torch.Tensor
    n: int = 1
    tags: list = dataclasses.field(default_factory=list)

    def moved(self, by):
        return dataclasses.replace(self, n=self.n + by)

    def __post_init__(self):
        self.tags.append(self.n)


@dataclasses.dataclass(frozen=True)
class Key:
    a: int
    b: str = "k"
''',
    "pair": '''
Pair = collections.namedtuple("Pair", ["t", "n"], defaults=[0])
''',
    "dims": '''
class Dims(tuple):
    @property
    def total(self):
        return sum(self)

    def scaled(self, k):
        return Dims(v * k for v in self)


class Out(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def first(self):
        return next(iter(self.values()))
''',
    "kinds": '''
import collections.abc
import typing

KINDS = {int: 1, float: 2, tuple: 3, collections.abc.Sequence: 4, typing.Union: 5, typing.Literal: 6}
''',
    "slotted": '''
class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def swap(self):
        self.a, self.b = self.b, self.a
        return self
''',
}


def define(w, name: str) -> None:
    """Write the module-level helper ``name`` (a key of ``CLASSES``) into the program once."""
    if name not in w.module_helpers:
        w.module_helpers[name] = name
        w.module_lines += CLASSES[name].strip("\n").splitlines() + ["", ""]


def escape(w, scope, name: str) -> list[str]:
    """Sometimes let the object ``name`` outlive the call (its state is then compared)."""
    r = w.rng.random()
    if r < 0.15 and "obj" in scope.names:
        return [f"obj.log.append({name})"]
    if r < 0.3:
        scope.function.global_writes.add("G_LAST")
        return [f"G_LAST = {name}"]
    if r < 0.4 and "d" in scope.names and "d" not in scope.frozen:
        return [f'd["o"] = {name}']
    return []


@statement("user_object", 3)
def user_object(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define(w, "acc")
    a, b, t, n = w.fresh("ob"), w.fresh("ob"), w.fresh("t"), w.fresh("n")
    cls = w.rng.choice(["Acc", "Acc2"])
    make = w.rng.choice([f"{cls}({w.tensor(scope)}, {w.rng.choice(['0', '1', '2'])})", f"{cls}({w.tensor(scope)})",
                         f"Acc.make({w.tensor(scope)})", f"{cls}.zero({w.rng.choice(tensors)})"])
    lines = [f"{a} = {make}"]
    changes = [
        lambda: f"{a}.add({w.tensor(scope)})",
        lambda: f"{a}.add({w.num(scope, 1)}).add({w.rng.choice(tensors)})",
        lambda: f"{a} += {w.tensor(scope)}",
        lambda: f"{a}.double = {w.tensor(scope)}",
        lambda: f"{a}.n = {a}.n + {w.num(scope, 1)}",
        lambda: f"{a}.extra = len({a}.hist)",
        lambda: f"{cls}.scale = {w.rng.choice(['2', '4'])}",  # a class attribute: every instance sees it
    ]
    for _ in range(w.rng.randint(1, 3)):
        lines.append(w.rng.choice(changes)())
    other = w.rng.choice([f"{cls}({w.rng.choice(tensors)}, 1)", f"{a} * {w.num(scope, 1)}", a])
    lines.append(f"{b} = {a} + {other}" if w.rng.random() < 0.5 else f"{b} = {w.rng.choice(tensors)} + {a}")
    reads = [
        f"{b}.t + {a}.double",
        f"{a}({w.tensor(scope)})",
        f"{b}.t * len({a}) + {a}.t * ({a} == {b})",
        f"{a}.t * (1 in {a}) + {b}.double * bool({b})",
        f"sum(({a}.t * h for h in {a}), {b}.t)",
        f"{a}.t + ({a}[-1] if len({a}) else 0)",
        f"({a}.t if {a} else {b}.t) * {cls}.scale",
    ]
    lines.append(f"{t} = {w.rng.choice(reads)}")
    lines.append(f"{n} = {a}.n + len({b}) + isinstance({b}, Acc) + (type({a}) is Acc2) + hasattr({a}, 'extra')")
    lines += escape(w, scope, w.rng.choice([a, b]))
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("dataclass_object", 2)
def dataclass_object(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define(w, "pt")
    p, q, t, n, keys = w.fresh("pt"), w.fresh("pt"), w.fresh("t"), w.fresh("n"), w.fresh("dd")
    lines = [f"{p} = Pt({w.tensor(scope)}, {w.rng.choice(['1', '2', 'n=3'])})"]
    changes = [
        lambda: f"{p}.t = {p}.t * {w.num(scope, 1)} + {w.rng.choice(tensors)}",
        lambda: f"{p}.n += 1",
        lambda: f"{p}.tags.append({w.num(scope, 1)})",
        lambda: f"{q} = {p}.moved({w.rng.choice(['1', '2'])})",
        lambda: f"{q} = dataclasses.replace({p}, t={w.tensor(scope)})",
    ]
    made_q = False
    for _ in range(w.rng.randint(1, 3)):
        line = w.rng.choice(changes)()
        made_q = made_q or line.startswith(q)
        lines.append(line)
    if not made_q:
        lines.append(f"{q} = Pt({p}.t + 1, n={p}.n)")
    lines.append(f"{t} = {p}.t * {q}.n + {q}.t")
    key = w.rng.choice(["k", "n"])
    lines += [f"{keys} = {{Key({p}.n): {p}.t, Key({q}.n, 'q'): {q}.t}}",
              f"{n} = len({keys}) + (Key({p}.n) in {keys}) + len(dataclasses.fields({p})) + len({q}.tags)"
              + w.rng.choice(["", f" + len(dataclasses.asdict({p}))", f" + len(dataclasses.astuple({q}))",
                              f" + ({p}.n == {q}.n)", f" + len({{Key(1), Key(1), Key(2, {key!r})}})"])]
    if w.rng.random() < 0.3:  # a frozen dataclass refuses assignment
        lines += ["try:", f"    Key(1).a = 2", "except dataclasses.FrozenInstanceError as e:",
                  f'    print("frozen", type(e).__name__, file=buf)' if "buf" in scope.names else "    pass"]
    lines += escape(w, scope, w.rng.choice([p, q]))
    scope.define(t, "tensor")
    scope.define(n, "num")
    scope.define(keys, "dict")
    return lines


@statement("namedtuple_object", 2)
def namedtuple_object(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define(w, "pair")
    p, q, t, n, u, m = (w.fresh(s) for s in ("pr", "pr", "t", "n", "t", "n"))
    make = w.rng.choice([f"Pair({w.tensor(scope)}, {w.num(scope, 1)})", f"Pair(t={w.tensor(scope)})",
                         f"Pair._make([{w.tensor(scope)}, 2])"])
    lines = [f"{p} = {make}"]
    lines.append(w.rng.choice([f"{q} = {p}._replace(n={p}.n + 1)", f"{q} = Pair({p}.t * 2, {p}[1])",
                               f"{q} = {p}._replace(t={w.tensor(scope)})"]))
    lines.append(w.rng.choice([f"{u}, {m} = {q}", f"{u}, {m} = {q}.t, {q}.n"]))
    lines.append(f"{t} = {u} + {p}[0] * {m}")
    lines.append(f"{n} = " + w.rng.choice([f"len({p}) + {p}.n", f"len({p}._asdict()) + ({p}._fields == ('t', 'n'))",
                                           f"isinstance({q}, tuple) + {q}.index({q}.n, 1)", f"sum(x_.n for x_ in ({p}, {q}))",
                                           f"({p} + {q})[-1]"]))
    lines += escape(w, scope, w.rng.choice([p, q]))
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("builtin_subclass", 2)
def builtin_subclass(w, scope, depth):
    """A ``tuple`` subclass with a property, a ``dict`` subclass read by attribute (``ModelOutput``)."""
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define(w, "dims")
    if w.rng.random() < 0.5:
        s, n = w.fresh("dm"), w.fresh("n")
        lines = [f"{s} = Dims({w.rng.choice(['x.shape', '(2, 3)', '(k, 1)' if 'k' in scope.names else '(1, 1)'])})"
                 if "x" in scope.names else f"{s} = Dims((2, 3))"]
        lines.append(f"{n} = " + w.rng.choice([f"{s}.total + len({s})", f"{s}.scaled(2).total - {s}[0]",
                                               f"len({s} + (1,)) + isinstance({s}, tuple)",
                                               f"sum({s}[1:]) + (type({s}.scaled(1)) is Dims)",
                                               f"max({s}) * {s}.count({s}[0])"]))
        scope.define(n, "num")
        return lines
    o, t, n = w.fresh("out"), w.fresh("t"), w.fresh("n")
    lines = [f"{o} = Out(a={w.tensor(scope)}, n={w.num(scope, 1)})"]
    for _ in range(w.rng.randint(0, 2)):
        lines.append(w.rng.choice([f'{o}["b"] = {w.tensor(scope)}', f"{o}.update(n={o}.n + 1)",
                                   f'{o}.setdefault("c", {w.rng.choice(tensors)})', f'{o}.pop("b", None)']))
    lines.append(f"{t} = " + w.rng.choice([f"{o}.a + {o}.first()", f'{o}["a"] * {o}.n',
                                           f'{o}.a + getattr({o}, "b", {o}.a)',
                                           f"sum({o}[k_] for k_ in {o} if k_ != 'n') * 1.0"]))
    lines.append(f"{n} = len({o}) + hasattr({o}, 'zz') + isinstance({o}, dict) + ('c' in {o})")
    lines += escape(w, scope, o)
    scope.define(t, "tensor")
    scope.define(n, "num")
    if w.rng.random() < 0.3:
        scope.define(o, "dict")
    return lines


@statement("slots_object", 1)
def slots_object(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define(w, "slotted")
    s, t = w.fresh("sl"), w.fresh("t")
    lines = [f"{s} = Slotted({w.tensor(scope)}, {w.rng.choice(tensors)})"]
    lines.append(w.rng.choice([f"{s}.swap()", f"{s}.a = {s}.a * 2", f"{s}.swap().swap()"]))
    if w.rng.random() < 0.3:
        lines += ["try:", f"    {s}.c = 1", "except AttributeError:", f"    {s}.b = {s}.b + 1"]
    lines.append(f"{t} = {s}.a - {s}.b")
    lines += escape(w, scope, s)
    scope.define(t, "tensor")
    return lines


@statement("local_dataclass", 1)
def local_dataclass(w, scope, depth):
    """A dataclass defined inside the function: made, changed by a method, compared, its fields read."""
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define(w, "pt")
    c, o, t, n = w.fresh("LocD"), w.fresh("lo"), w.fresh("t"), w.fresh("n")
    frozen = w.rng.random() < 0.3
    lines = [f"@dataclasses.dataclass{'(frozen=True)' if frozen else ''}", f"class {c}:", "    t: torch.Tensor",
             "    n: int = 1", "", "    def total(self):", "        return self.t * self.n"]
    lines.append(f"{o} = {c}({w.tensor(scope)}, {w.rng.choice(['2', 'n=3'])})")
    if frozen:
        lines += [f"{o} = dataclasses.replace({o}, n={o}.n + 1)"]
    else:
        lines += [f"{o}.n += {w.rng.choice(['1', '2'])}", f"{o}.t = {o}.t + {w.rng.choice(tensors)}"]
    lines.append(f"{t} = {o}.total() + {o}.t")
    lines.append(f"{n} = len(dataclasses.fields({o})) + ({o} == {c}({o}.t, {o}.n)) + len(dataclasses.asdict({o}))")
    lines += escape(w, scope, o)
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("local_class", 2)
def local_class(w, scope, depth):
    """A ``class`` statement inside the function: methods reading the function's locals (cells), a
    subclass calling ``super()``, class attributes changed after an instance exists, dunders; the object
    or the class escapes sometimes (the object's ``__dict__`` is then compared)."""
    tensors = scope.of("tensor")
    if not tensors or scope.function is None:
        return None
    c, o, t, n = w.fresh("Loc"), w.fresh("lo"), w.fresh("t"), w.fresh("n")
    seen = w.rng.choice(tensors)  # read by a method: a cell of the function
    if scope.function is not None and seen not in ("x", "y"):
        scope.function.captured.add(seen)
    lines = [f"class {c}:", f"    unit = {w.rng.choice(['1', '2', '0.5'])}", "",
             "    def __init__(self, t, n=1):", "        self.t = t", "        self.n = n", "",
             "    def step(self, v):", "        self.t = self.t * self.unit + v", "        self.n += 1",
             "        return self", "",
             "    def seen(self):", f"        return self.t + {seen}"]
    extra = w.rng.choice(["property", "dunders", "none"])
    if extra == "property":
        lines += ["", "    @property", "    def twice(self):", "        return self.t * 2"]
    elif extra == "dunders":
        lines += ["", "    def __add__(self, other):", f"        return {c}(self.t + other, self.n)", "",
                  "    def __len__(self):", "        return max(int(self.n), 0)"]
    cls = c
    if w.rng.random() < 0.4:
        cls = w.fresh("Sub")
        lines += [f"class {cls}({c}):", "    unit = 3", "",
                  "    def step(self, v):", "        super().step(v * 2)", "        self.tag = type(self).__name__",
                  "        return self"]
    if w.rng.random() < 0.2:  # a class made by calling type()
        cls = w.fresh("Dyn")
        lines.append(f"{cls} = type({cls!r}, ({c},), {{'unit': {w.rng.choice(['3', '5'])}, 'tag': 'dyn'}})")
    lines.append(f"{o} = {cls}({w.tensor(scope)}, {w.rng.choice(['0', '1', '2'])})")
    for _ in range(w.rng.randint(1, 3)):
        lines.append(w.rng.choice([f"{o}.step({w.tensor(scope)})", f"{o}.step({w.num(scope, 1)}).step({seen})",
                                   f"{c}.unit = {w.rng.choice(['2', '4'])}", f"{o}.n = {o}.n + {w.num(scope, 1)}",
                                   f"{o}.extra = {o}.n * 2"]))
    reads = [f"{o}.seen() * {o}.unit", f"{o}.t + {o}.n"]
    if extra == "property":
        reads.append(f"{o}.twice - {o}.t")
    elif extra == "dunders":
        reads.append(f"({o} + {w.rng.choice(tensors)}).t * len({o})")
    lines.append(f"{t} = {w.rng.choice(reads)}")
    lines.append(f"{n} = {o}.n + isinstance({o}, {c}) + (type({o}) is {cls}) + len({cls}.__qualname__)"
                 + w.rng.choice(["", f" + hasattr({o}, 'extra')", f" + ({cls}.unit == {c}.unit)"]))
    if w.rng.random() < 0.15:
        lines.append(f"G_LIST.append({cls}.__name__)")
    lines += escape(w, scope, o)
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("bound_method", 1)
def bound_method(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define(w, "acc")
    a, m, t, n = w.fresh("ob"), w.fresh("m"), w.fresh("t"), w.fresh("n")
    lines = [f"{a} = Acc({w.tensor(scope)})", f"{m} = " + w.rng.choice([f"{a}.add", f"getattr({a}, 'add')"])]
    lines.append(w.rng.choice([f"{m}({w.tensor(scope)})", f"{m}.__func__({a}, {w.num(scope, 1)})",
                               f"{m}({w.rng.choice(tensors)}).add({w.num(scope, 1)})"]))
    lines.append(f"{t} = {m}.__self__.t * ({m}.__self__ is {a}) + {a}.t")
    lines.append(f"{n} = ({m}.__func__ is Acc.add) + len({m}.__name__) + callable({m})"
                 + w.rng.choice(["", f" + ({m} == {a}.add)", f" + ({m} != Acc({a}.t).add)", f" + {m}.__self__.n"]))
    lines += escape(w, scope, a)
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("type_table", 1)
def type_table(w, scope, depth):
    define(w, "kinds")
    n = w.fresh("n")
    keys = ["tuple", "collections.abc.Sequence", "typing.get_origin(typing.Literal['a'])",
            "typing.get_origin(typing.Union[int, str])", "type(G_SCALE)", "list"]
    if "k" in scope.names:
        keys.append("type(k)")
    lines = []
    if w.rng.random() < 0.25:  # a new key or a new value: the table's keys and the values read are guarded
        lines.append(w.rng.choice(["KINDS[bool] = KINDS.get(bool, 0) + 1", "KINDS[list] = 7", "KINDS.pop(list, None)"]))
    lines.append(f"{n} = KINDS.get({w.rng.choice(keys)}, 0) + KINDS[{w.rng.choice(['int', 'typing.Union'])}]"
                 + w.rng.choice(["", " + len(KINDS)", " + (list in KINDS)", " + sum(KINDS.values())"]))
    scope.define(n, "num")
    return lines
