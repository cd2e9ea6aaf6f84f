"""Objects of user subclasses of ``dict``/``OrderedDict`` (the ``ModelOutput`` pattern), made in captured code
or passed to it (issue 8, item 2).

Made in the trace, such an object has items (a dict of the trace) besides its attributes; the class's
Python methods are inlined, and what they reach of the built-in base (``super().__setitem__``, inherited
``keys``/``__len__``/``__iter__``) acts on the items.  Returned, it is rebuilt with eager's type, items and
``__dict__``.  Read from the frame, its items are read past the class's methods and guarded by its keys.
Each test compares with eager (``run_differential``), including the type, items and attributes of what is
returned, then graph counts.
"""
import collections
import dataclasses

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same, explain_captured, run_differential

BACKENDS = ["eager", "aot_eager"]


@dynacap.disable  # runs on what the captured code returned, as eager code sees it
def parts(obj):
    """What a dict subclass object holds, comparable with ``assert_same``: type, items, attributes."""
    if isinstance(obj, dict) and type(obj) not in (dict, collections.OrderedDict):
        return (type(obj).__name__, dict(dict.items(obj)), dict(vars(obj)))
    if isinstance(obj, list) and type(obj) is not list:
        return (type(obj).__name__, [parts(o) for o in list.__iter__(obj)], dict(vars(obj)))
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        return type(obj)(*[parts(o) for o in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)([parts(o) for o in obj])
    return obj


def check(fn, *args, backend="eager", graphs=1, breaks=0, **kwargs):
    counting = CountingBackend(inner=backend)
    run_differential(lambda *a, **k: parts(fn(*a, **k)), *args, backend=counting, **kwargs)
    explained = explain_captured(fn, *args, **kwargs)
    assert len(explained.break_reasons) == breaks, [b.reason for b in explained.break_reasons]
    assert explained.graph_count == graphs
    return explained


class Output(collections.OrderedDict):
    """A miniature ``ModelOutput``: a dataclass whose fields are also its items."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LayerOutput(Output):
    hidden: torch.Tensor = None
    attention: torch.Tensor = None
    extra: tuple = None


class Bag(dict):
    def __init__(self, scale, **items):
        super().__init__(**items)
        self.scale = scale

    def __getitem__(self, key):
        return super().__getitem__(key) * self.scale

    def total(self):
        total = 0
        for k in self:
            total = total + super().__getitem__(k)
        return total


class Ordered(collections.OrderedDict):
    def first(self):
        return next(iter(self))


@pytest.mark.parametrize("backend", BACKENDS)
def test_model_output_pattern_made_read_and_returned(backend):
    def f(x):
        out = LayerOutput(hidden=x * 2, extra=(x, x + 1))
        a = out.hidden + out[0] + out["hidden"] + out.to_tuple()[1][1]
        return a, len(out), list(out.keys()), [k for k in out], "attention" in out, out.attention, out

    check(f, torch.ones(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_subclass_init_super_and_overridden_getitem(backend):
    def f(x):
        bag = Bag(3.0, a=x, b=x + 1)
        bag["c"] = x * 0
        return bag["a"] + bag.total(), len(bag), bag.get("b"), bag.get("zz", 5), bag

    check(f, torch.ones(2), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ordered_dict_subclass_with_the_base_init(backend):
    def f(x):
        d = Ordered(b=x, a=x + 1)
        d["z"] = x * 3
        del d["b"]
        return d.first(), list(d.items())[0][1], list(d.values())[-1], bool(d), d

    check(f, torch.ones(2), backend=backend)


def test_same_list_in_items_and_attributes_is_one_object():
    def f(x):
        out = LayerOutput(hidden=x, extra=[x])
        out.extra.append(x + 1)
        return out

    def g(x):
        out = f(x)
        return out.extra is out["extra"], len(out["extra"]), parts(out)

    run_differential(g, torch.ones(2))
    result = dynacap.optimize(f, backend="eager")(torch.ones(2))
    assert result.extra is dict.__getitem__(result, "extra")


def test_dict_subclass_live_across_a_graph_break():
    def f(x):
        out = LayerOutput(hidden=x + 1)
        print("between")
        return out.hidden * 2, out

    check(f, torch.ones(2), graphs=2, breaks=1)


def test_dict_subclass_from_the_frame_read_and_guarded_by_its_keys():
    def f(out):
        return out.hidden * len(out) + out[0] + out["hidden"], list(out.keys())

    backend = CountingBackend()
    one = LayerOutput(hidden=torch.ones(2))
    two = LayerOutput(hidden=torch.ones(2), attention=torch.zeros(2))
    compiled = dynacap.optimize(f, backend=backend)
    assert_same(f(one), compiled(one))
    assert backend.compiles == 1
    assert_same(f(two), compiled(two))  # another key: the key guard fails, compiled again
    assert backend.compiles == 2
    assert_same(f(one), compiled(one))
    assert backend.compiles == 2


def test_changing_the_items_of_a_frame_dict_subclass_breaks_with_the_eager_result():
    def f(out, x):
        out["attention"] = x
        return out.attention + 1

    run_differential(f, LayerOutput(hidden=torch.ones(2)), torch.ones(2),
                     fresh_inputs=lambda: ((LayerOutput(hidden=torch.ones(2)), torch.ones(2)), {}))


def test_missing_key_is_a_break_and_raises_as_eager():
    def f(x):
        bag = Bag(1.0, a=x)
        try:
            return bag["missing"]
        except KeyError:
            return x - 1

    run_differential(f, torch.ones(2))


transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("backend", BACKENDS)
def test_transformers_model_output(backend):
    from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput

    def f(x):
        out = BaseModelOutput(last_hidden_state=x * 2, hidden_states=(x, x + 1))
        lm = MaskedLMOutput(logits=out[0] + 1)
        return out.last_hidden_state + out[0] + out["last_hidden_state"], len(out), list(out.keys()), \
            out.to_tuple()[1][0], lm["logits"], lm.loss, out, lm

    check(f, torch.ones(3), backend=backend)


# -- named tuples ------------------------------------------------------------------------------------------

Pair = collections.namedtuple("Pair", ["loc", "scale"], defaults=[1.0])


class Span(Pair):
    def width(self):
        return self.scale - self.loc

    @property
    def middle(self):
        return (self.loc + self.scale) / 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_namedtuple_made_read_replaced_and_returned(backend):
    def f(x):
        p = Pair(x, scale=x + 1)
        q = p._replace(scale=x * 3)
        loc, scale = q
        return p, q, loc + scale + p[1] + p.loc, p._asdict()["scale"], p._fields, p[1:], len(p), Pair(2), \
            type(q).__name__

    check(f, torch.ones(2), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_namedtuple_subclass_methods_and_properties(backend):
    def f(x):
        s = Span(x, x * 4)
        return s.width() + s.middle, s, s._replace(loc=x)

    check(f, torch.ones(2), backend=backend)


def test_namedtuple_input_read_by_field_and_guarded_by_type():
    def f(p):
        return p.loc * p.scale, p[0], p

    backend = CountingBackend()
    compiled = dynacap.optimize(f, backend=backend)
    for arg in (Pair(torch.ones(2), 2.0), Pair(torch.ones(2), 2.0), Span(torch.ones(2), 2.0)):
        assert_same(f(arg), compiled(arg))
    assert backend.compiles == 2  # another class: another graph
    run_differential(f, Pair(torch.ones(2), 3.0))


def test_namedtuple_with_a_mutable_default_breaks_with_the_eager_result():
    Shared = collections.namedtuple("Shared", ["a", "log"], defaults=[[]])

    def f(x):
        s = Shared(x)
        return s.a + 1, s.log is Shared(x).log

    run_differential(f, torch.ones(2))


def test_torch_named_results():
    def f(x):
        m = torch.max(x, 0)
        values, indices = m
        return m.values + values, indices, m, m[:1], type(m)

    check(f, torch.randn(3, 2))


# -- collections.Counter, dataclasses.asdict, sorted/min/max with a key --------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_counter_made_updated_read_and_returned(backend):
    def f(x, names):
        c = collections.Counter(names)
        c.update(["a", "z"])
        c.update({"b": 5})
        plain = collections.Counter(a=2, b=1)
        return x * c["a"] + c["missing"], c.most_common(2), c, plain, c.total(), "missing" in c, len(c)

    check(f, torch.ones(2), ["a", "b", "a"], backend=backend)


def test_sorted_min_max_with_a_key():
    def f(x):
        ranked = sorted([x, x * 3, x * 2], key=lambda t: 0, reverse=True)  # stable: the original order
        pairs = sorted({"b": 1, "a": 2, "c": 0}.items(), key=lambda kv: kv[1])
        return ranked, pairs, max(["bb", "a", "ccc"], key=len), min([3, 1, 2], key=lambda v: -v), \
            max([], key=len, default=x)

    check(f, torch.ones(2))


@dataclasses.dataclass
class Inner:
    k: int = 3


@dataclasses.dataclass
class Settings:
    scale: float = 2.0
    names: list = dataclasses.field(default_factory=lambda: ["a"])
    inner: Inner = dataclasses.field(default_factory=Inner)
    pair: Pair = Pair(1, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataclasses_asdict(backend):
    def f(x):
        s = Settings()
        d = dataclasses.asdict(s)
        return x * d["scale"], d, d["inner"]["k"], d["pair"]

    check(f, torch.ones(2), backend=backend)


# -- enums ----------------------------------------------------------------------------------------------------

import enum  # noqa: E402


class Color(enum.Enum):
    RED = 1
    GREEN = 2

    def scaled(self, x):
        return x * self.value

    @property
    def loud(self):
        return self.name.upper() + "!"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 5


class Odd(enum.Enum):
    A = 1
    B = 2

    def __eq__(self, other):
        return True

    __hash__ = enum.Enum.__hash__


@pytest.mark.parametrize("backend", BACKENDS)
def test_enum_members_values_names_lookup_and_iteration(backend):
    def f(x, mode):
        c = Color.RED
        return (c.scaled(x) + Level.HIGH, c.name, c.value, c.loud, c is Color.RED, c == Color.GREEN,
                Color(2), Color["GREEN"].value, [m.value for m in Color], Level.LOW + 1, mode is Color.GREEN,
                mode, len(Color), Color.GREEN in Color, {Color.RED: 1}[c])

    check(f, torch.ones(2), Color.GREEN, backend=backend)


def test_enum_member_argument_is_guarded_by_identity():
    def f(x, mode):
        return x * mode.value if mode is Color.RED else x - mode.value

    backend = CountingBackend()
    compiled = dynacap.optimize(f, backend=backend)
    for mode in (Color.RED, Color.GREEN, Color.RED):
        assert_same(f(torch.ones(2), mode), compiled(torch.ones(2), mode))
    assert backend.compiles == 2


def test_enum_with_its_own_eq_is_not_folded():
    def f(x):
        return x + 1, Odd.A == Odd.B, Odd(2).name

    run_differential(f, torch.ones(2))


def test_unknown_enum_value_raises_as_eager():
    def f(x):
        try:
            return Color(7)
        except ValueError:
            return x - 1

    run_differential(f, torch.ones(2))


class Loose(Pair):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


def test_namedtuple_with_its_own_eq_is_not_folded():
    def f(x):
        return x + 1, Loose(1, 2) == Loose(3, 4), Loose(1, 2) != (5, 6)

    run_differential(f, torch.ones(2))


class Renamed(dict):
    def keys(self):
        return ["renamed"]

    def base_keys(self):
        return super().keys()


def test_a_view_of_the_base_is_rebuilt_as_the_base_view():
    def f(x):
        d = Renamed(a=x)
        return d.base_keys(), d.keys(), x + 1

    run_differential(lambda x: [list(v) for v in f(x)[:2]] + [type(f(x)[0]).__name__], torch.ones(2))
    result = dynacap.optimize(f, backend="eager")(torch.ones(2))
    assert list(result[0]) == ["a"] and result[1] == ["renamed"]


def test_environment_variables_are_read_and_guarded_by_their_values(monkeypatch):
    import os

    def f(x):
        forced = os.environ.get("DYNACAP_TEST_FLAG", "0") == "1"
        return x + forced + ("DYNACAP_TEST_OTHER" in os.environ)

    monkeypatch.delenv("DYNACAP_TEST_FLAG", raising=False)
    monkeypatch.delenv("DYNACAP_TEST_OTHER", raising=False)
    check(f, torch.ones(2))
    backend = CountingBackend()
    compiled = dynacap.optimize(f, backend=backend)
    assert_same(f(torch.ones(2)), compiled(torch.ones(2)))
    monkeypatch.setenv("DYNACAP_TEST_FLAG", "1")
    assert_same(f(torch.ones(2)), compiled(torch.ones(2)))  # the guard on its value fails: compiled again
    assert backend.compiles == 2


# -- list subclasses -------------------------------------------------------------------------------------------


class Stack(list):
    def __init__(self, items, tag):
        super().__init__(items)
        self.tag = tag

    def push(self, x):
        self.append(x)
        return self

    def __getitem__(self, i):
        return super().__getitem__(i) * 2


class Plain(list):
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_subclass_made_changed_read_and_returned(backend):
    def f(x):
        s = Stack([x], "t")
        s.push(x + 1)
        p = Plain([1, 2])
        p.append(3)
        return s[1], len(s), s.tag, [v for v in s], p.pop(), list(p), 3 in p, bool(Plain()), s, p

    check(f, torch.ones(2), backend=backend)


def test_iterating_a_list_subclass_sees_items_appended_by_the_loop():
    def f(x):
        p = Plain([1, 2])
        total = x
        for v in p:
            if v < 3:
                p.append(v + 2)
            total = total + v
        return total, list(p)

    check(f, torch.ones(2))


def test_iterating_a_dict_subclass_while_adding_keys_raises_as_eager():
    def f(x):
        d = Bag(1.0, a=x)
        try:
            for k in d:
                d[k + "!"] = x
        except RuntimeError:
            return x - 1
        return x

    run_differential(f, torch.ones(2))
