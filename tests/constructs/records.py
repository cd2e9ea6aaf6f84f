"""Records: subclasses of tuple/list/dict/OrderedDict, dataclasses, namedtuples, enums."""
import collections
import dataclasses
import enum
import typing

import torch

from . import construct, xy


class Output(collections.OrderedDict):
    """The ModelOutput pattern: a dict whose keys are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


class Pair(tuple):
    def __new__(cls, a, b):
        return super().__new__(cls, (a, b))

    @property
    def first(self):
        return self[0]

    def swap(self):
        return Pair(self[1], self[0])


class Stack(list):
    def push(self, v):
        self.append(v)
        return self

    def top(self):
        return self[-1]


class Config(dict):
    def __missing__(self, key):
        return 0


class Attrs(dict):
    def __getattr__(self, name):
        return self[name]

    def __setattr__(self, name, value):
        self[name] = value


@dataclasses.dataclass
class Point:
    x: torch.Tensor
    scale: float = 2.0

    def scaled(self):
        return self.x * self.scale


@dataclasses.dataclass
class WithFactory:
    x: torch.Tensor
    items: list = dataclasses.field(default_factory=list)
    n: int = dataclasses.field(default=3, repr=False)


@dataclasses.dataclass
class Posted:
    x: torch.Tensor

    def __post_init__(self):
        self.y = self.x + 1


@dataclasses.dataclass(eq=False)
class Box:
    """Compared by its fields (``vars``) when returned: no generated ``__eq__`` over tensors."""

    x: torch.Tensor
    k: float = 1.0


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: int = 1


@dataclasses.dataclass
class Derived(Point):
    shift: float = 1.0

    def scaled(self):
        return super().scaled() + self.shift


PointNT = collections.namedtuple("PointNT", ["x", "y"])
WithDefault = collections.namedtuple("WithDefault", "a b", defaults=[5])


class Typed(typing.NamedTuple):
    t: torch.Tensor
    k: int = 2

    def scaled(self):
        return self.t * self.k


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Mode(enum.IntEnum):
    TRAIN = 0
    EVAL = 1


class Perm(enum.Flag):
    R = 1
    W = 2


class Act(str, enum.Enum):
    RELU = "relu"
    TANH = "tanh"


@construct()
def ordereddict_subclass_attr(x):
    out = Output(logits=x * 2, hidden=x + 1)
    return out.logits + out["hidden"]


@construct()
def ordereddict_subclass_to_tuple(x):
    return Output(a=x, b=x * 3).to_tuple()


@construct()
def ordereddict_subclass_returned(x):
    return Output(a=x.sin())


@construct(xy)
def tuple_subclass_new(x, y):
    p = Pair(x, y)
    return p.first + p[1], len(p)


@construct(xy)
def tuple_subclass_method(x, y):
    a, b = Pair(x, y).swap()
    return a - b


@construct()
def list_subclass_methods(x):
    s = Stack([x])
    s.push(x * 2).push(x * 3)
    return s.top() + len(s)


@construct()
def list_subclass_iterate(x):
    return sum(Stack([x, x, x]))


@construct()
def dict_subclass_missing(x):
    c = Config(lr=2)
    return x * c["lr"] + c["momentum"]


@construct()
def dict_subclass_attr_access(x):
    a = Attrs()
    a.t = x * 2
    return a.t + a["t"]


@construct()
def isinstance_dict_subclass(x):
    return x + isinstance(Output(), dict) + isinstance(Pair(1, 2), tuple) * 2


@construct()
def dataclass_make(x):
    return Point(x).scaled() + Point(x, 5.0).scaled()


@construct()
def dataclass_field_default_factory(x):
    w = WithFactory(x)
    w.items.append(x * 2)
    return w.x + w.items[0] + w.n


@construct()
def dataclass_post_init(x):
    return Posted(x).y


@construct()
def dataclass_fields(x):
    names = [f.name for f in dataclasses.fields(Point)]
    return x * len(names), names


@construct()
def dataclass_replace(x):
    p = dataclasses.replace(Point(x), scale=10.0)
    return p.scaled()


@construct()
def dataclass_asdict(x):
    d = dataclasses.asdict(Point(x, 3.0))
    return d["x"] * d["scale"], sorted(d)


@construct()
def dataclass_astuple(x):
    a, b = dataclasses.astuple(Point(x, 3.0))
    return a * b


@construct()
def dataclass_eq(x):
    return x + (Frozen(1, 2) == Frozen(1, 2)) + (Frozen(1) == Frozen(2)) * 2


@construct()
def dataclass_frozen_hash(x):
    d = {Frozen(1): x, Frozen(2): x * 2}
    return d[Frozen(2)]


@construct()
def dataclass_inherit(x):
    return Derived(x, 2.0, 5.0).scaled()


@construct()
def dataclass_is_dataclass(x):
    return x + dataclasses.is_dataclass(Point(x)) + dataclasses.is_dataclass(x) * 2


@construct()
def dataclass_returned(x):
    return Box(x * 2, 4.0)


@construct()
def dataclass_in_function(x):
    @dataclasses.dataclass
    class Local:
        t: torch.Tensor
        k: int = 3

    return Local(x).t * Local(x).k


@construct(xy)
def namedtuple_make(x, y):
    p = PointNT(x, y)
    return p.x + p[1]


@construct(xy)
def namedtuple_replace(x, y):
    p = PointNT(x, y)._replace(y=x * 10)
    return p.x + p.y


@construct()
def namedtuple_defaults(x):
    w = WithDefault(x)
    return w.a * w.b


@construct(xy)
def namedtuple_asdict_fields(x, y):
    d = PointNT(x, y)._asdict()
    return d["x"] - d["y"], PointNT._fields


@construct(xy)
def namedtuple_make_classmethod(x, y):
    return PointNT._make([x, y * 2]).y + 1


@construct(xy)
def namedtuple_returned(x, y):
    return PointNT(x.cos(), y)


@construct()
def namedtuple_in_function(x):
    P = collections.namedtuple("P", ["a", "b"])
    p = P(x, 2)
    return p.a * p.b


@construct()
def typed_namedtuple(x):
    return Typed(x).scaled() + Typed(x, 5).k


@construct(xy)
def namedtuple_unpack(x, y):
    a, b = PointNT(x, y)
    return a * b


@construct()
def enum_compare(x, c=Color.RED):
    return x + 1 if c is Color.RED else x - 1


@construct()
def enum_value_name(x):
    return x * Color.GREEN.value, Color.GREEN.name


@construct()
def enum_lookup(x):
    return x * Color(2).value + Color["RED"].value


@construct()
def enum_iterate(x):
    return x * sum(c.value for c in Color), len(Color)


@construct()
def intenum_arith(x):
    return x * (Mode.EVAL + 1), Mode.EVAL == 1


@construct()
def flag_enum_ops(x):
    p = Perm.R | Perm.W
    return x + (Perm.W in p) + bool(p & Perm.R) * 2


@construct()
def str_enum(x):
    act = Act("tanh")
    return torch.tanh(x) if act == "tanh" else torch.relu(x)


@construct()
def enum_dict_key(x):
    table = {Color.RED: 2, Color.GREEN: 3}
    return x * table[Color.GREEN]
