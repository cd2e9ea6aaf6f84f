"""The C guard program (``_C.GuardProgram``) against the generated Python check of the same guards.

Differential: for guard sets of every kind (nested sources, missing locals and attributes, NaN and
-0.0, bool vs int, tensors differing in each property, weakly held objects dying) both checks must
agree on every frame, and the guards the program knows must not be left to Python.  Then the
program end to end: the hook runs it, recompiles still happen, entries stay in most-recently-used
order, and malformed program data is refused instead of crashing.
"""
from __future__ import annotations

import collections
import gc
import inspect
import math
import weakref

import pytest
import torch

import dynacap
from dynacap import _C
from dynacap.guards import GuardSet, compile_guards
from dynacap.guards.program import SRC_ATTR, SRC_LOCAL, CK_TENSOR, CK_TYPE, tensors_in_c
from dynacap.source import (
    AttrSource,
    BuiltinSource,
    CellContentsSource,
    ClassSource,
    DictEntrySource,
    DictStorageSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    ModuleGlobalSource,
)

L_A = LocalSource("a")


@pytest.fixture(autouse=True)
def c_guards_by_default(monkeypatch):
    """These tests are about the C program: the debugging switch must not be on (CI may set it)."""
    monkeypatch.delenv("DYNACAP_PYTHON_GUARDS", raising=False)


def agree(gs: GuardSet, frames, *, builtins_dict=None, in_c: bool = True) -> list[bool]:
    """Both checks of ``gs`` on each ``(L, G)``: the same answer (a bool); returns the answers."""
    c = compile_guards(gs, builtins_dict, python=False)
    p = compile_guards(gs, builtins_dict, python=True)
    assert type(c.fn) is _C.GuardProgram and c.python_fn is not c.fn
    if in_c:
        assert not [line for line in c.program if line.startswith("python:")], c.program
    answers = []
    for i, (L, G) in enumerate(frames):
        want = p.fn(L, G)
        got = c.fn(L, G)
        assert got is bool(want), f"frame {i}: C {got}, Python {want!r}; guards:\n" + "\n".join(c.program)
        answers.append(got)
    return answers


def locals_frames(values, G=None):
    """One frame per value bound to local ``a``, and one where ``a`` is missing."""
    G = G if G is not None else {}
    return [({"a": v}, G) for v in values] + [({}, G)]


# ---------------------------------------------------------------------------------------------------
# Constants: type and value, floats by their bits.
NAN, NEG_NAN = float("nan"), -float("nan")
POOL = [0, 1, -1, 2**70, True, False, None, 0.0, -0.0, 1.0, 0.5, NAN, NEG_NAN, math.inf, -math.inf, 1e-300,
        "a", "", "{x}", b"a", 0j, -0j, complex(0, -0.0), complex(NAN, 1), 1 + 2j, (1,), (True,), (1.0,), (-0.0,),
        (0.0,), (1, (2.0, False)), [1], frozenset({1}), frozenset({True}), frozenset({1.0}), slice(1, 2),
        slice(1.0, 2), range(3), Ellipsis, torch.Size([2, 3]), type("Int", (int,), {})(1), (NAN,), (NAN, 1),
        frozenset({0.0}), frozenset({-0.0}), frozenset({(1, 2.0)}), slice(None, -0.0), slice(None, 0.0), [1.0, True],
        [1, 1], ((1, 2.0),), ((1, 2),), (None, Ellipsis, NotImplemented, b"x", range(2)), (torch.Size([2]),)]


@pytest.mark.parametrize("value", POOL, ids=repr)
def test_constants_agree_with_python(value):
    gs = GuardSet()
    gs.equals_match(L_A, value)
    answers = agree(gs, locals_frames(POOL))
    assert answers[next(i for i, v in enumerate(POOL) if v is value)]
    assert not all(answers)


def test_minus_zero_and_nan_are_told_apart():
    for value, other in ((0.0, -0.0), (-0.0, 0.0), (NAN, 0.0), (1, True), (True, 1), (1.0, 1)):
        gs = GuardSet()
        gs.equals_match(L_A, value)
        assert agree(gs, locals_frames([value, other])) == [True, False, False]


# ---------------------------------------------------------------------------------------------------
# Sources: locals, globals, attribute chains, items, cells, generic attributes, dict storage.
class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Raising:
    @property
    def bad(self):
        raise ValueError("no")

    @property
    def stop(self):
        raise KeyboardInterrupt


class Hooked:
    def __getattribute__(self, name):
        if name == "x":
            return "from the hook"
        return object.__getattribute__(self, name)


class Missing(dict):
    def __missing__(self, key):
        return 7


def test_attribute_chains_and_missing_attributes():
    src = AttrSource(AttrSource(L_A, "inner"), "x")
    gs = GuardSet()
    gs.type_match(L_A, Box())
    gs.type_match(AttrSource(L_A, "inner"), Box())
    gs.equals_match(src, 3)
    gs.equals_match(AttrSource(L_A, "y"), "s")
    frames = locals_frames([Box(inner=Box(x=3), y="s"), Box(inner=Box(x=4), y="s"), Box(inner=Box(), y="s"),
                            Box(inner=Box(x=3)), Box(inner=3, y="s"), Box(inner=Box(x=3.0), y="s"), 5])
    assert agree(gs, frames) == [True] + [False] * 7


def test_a_read_that_raises_fails_the_guard_and_an_interrupt_propagates():
    gs = GuardSet()
    gs.equals_match(AttrSource(L_A, "bad"), 1)
    assert agree(gs, locals_frames([Raising()])) == [False, False]
    gs = GuardSet()
    gs.equals_match(AttrSource(L_A, "stop"), 1)
    for python in (True, False):
        with pytest.raises(KeyboardInterrupt):
            compile_guards(gs, python=python).fn({"a": Raising()}, {})


def test_items_by_index_and_key():
    gs = GuardSet()
    gs.equals_match(ItemSource(L_A, 0), 1)
    gs.equals_match(ItemSource(L_A, -1), 2)
    assert agree(gs, locals_frames([[1, 2], (1, 2), [1, 5, 2], [1], [], {0: 1, -1: 2}, {0: 1}, "12", [True, 2]])) == \
        [True, True, True, False, False, True, False, False, False, False]
    gs = GuardSet()
    gs.equals_match(ItemSource(ItemSource(L_A, "k"), 1), 0.5)
    assert agree(gs, locals_frames([{"k": [0, 0.5]}, {"k": (0, 0.5)}, {"k": [0]}, {"j": [0, 0.5]},
                                    collections.OrderedDict(k=[0, 0.5]), Missing()])) == \
        [True, True, False, False, True, False, False]


def test_globals_builtins_other_modules_and_classes():
    other = {"w": 2}
    gs = GuardSet()
    gs.equals_match(GlobalSource("g"), 1)
    gs.equals_match(ModuleGlobalSource("other.mod", "w", other), 2)
    gs.id_match(BuiltinSource("len"), len)
    gs.equals_match(AttrSource(ClassSource(Box), "__name__"), "Box")
    frames = [({}, {"g": 1}), ({}, {"g": 2}), ({}, {}), ({}, {"g": True})]
    assert agree(gs, frames) == [True, False, False, False]
    other["w"] = 3
    assert agree(gs, frames) == [False] * 4
    other["w"] = 2
    assert agree(gs, frames, builtins_dict={"len": len}) == [True, False, False, False]
    assert agree(gs, frames, builtins_dict={"len": abs}) == [False] * 4


def test_dict_entries_cells_generic_attributes_and_dict_storage():
    def make(v):
        def inner():
            return v

        return inner

    gs = GuardSet()
    gs.equals_match(CellContentsSource(L_A, 0, "v"), 4)
    assert agree(gs, locals_frames([make(4), make(5), make(4.0), len, Box()])) == [True, False, False, False, False,
                                                                                    False]
    gs = GuardSet()
    gs.equals_match(GenericAttrSource(L_A, "x"), 1)
    hooked = Hooked()
    object.__setattr__(hooked, "x", 1)
    assert agree(gs, locals_frames([hooked, Box(x=1), Box(x=2), Hooked()])) == [True, True, False, False, False]
    gs = GuardSet()
    gs.equals_match(DictStorageSource(L_A, "k"), 7)
    assert agree(gs, locals_frames([{"k": 7}, Missing(), Missing(k=8), {}, [7], Box(k=7)])) == \
        [True, True, False, False, False, False, False]
    lin = torch.nn.Linear(2, 2)
    gs = GuardSet()
    gs.type_match(DictEntrySource(L_A, "_parameters", "weight"), lin.weight)
    gs.equals_match(DictEntrySource(L_A, "_buffers", "b"), None)
    lin2 = torch.nn.Linear(2, 2)
    lin2.register_buffer("b", None)
    lin.register_buffer("b", torch.ones(1))
    assert agree(gs, locals_frames([lin2, lin, torch.nn.ReLU()])) == [True, False, False, False]


def test_length_and_keys():
    gs = GuardSet()
    gs.length(L_A, [1, 2])
    assert agree(gs, locals_frames([[1, 2], [3, 4], [1], (1, 2), [1, 2, 3]])) == [True, True, False, False, False,
                                                                                  False]
    gs = GuardSet()
    gs.keys_match(L_A, ["x", "y"])
    assert agree(gs, locals_frames([{"x": 1, "y": 2}, {"y": 1, "x": 2}, {"x": 1}, {"x": 1, "y": 2, "z": 3},
                                    collections.OrderedDict(x=1, y=2), Missing(x=1, y=2), ["x", "y"], "xy", 3])) == \
        [True, False, False, False, True, True, True, True, False, False]  # list("xy") == ["x", "y"]
    gs = GuardSet()
    gs.keys_match(L_A, [1, 2.0])
    assert agree(gs, locals_frames([{1: 0, 2.0: 0}, {True: 0, 2.0: 0}, {1: 0, 2: 0}, {1.0: 0, 2.0: 0}])) == \
        [True, False, False, False, False]


# ---------------------------------------------------------------------------------------------------
# Tensors.
def test_tensor_checks_run_in_c():
    assert tensors_in_c()
    gs = GuardSet()
    gs.tensor_match(L_A, torch.ones(2, 3))
    c = compile_guards(gs, python=False)
    assert c.program == [f"tensor L['a'] matches {next(iter(gs)).op[2]}"]


def _tensor_variants(base: torch.Tensor):
    floating = base.dtype.is_floating_point
    return [
        base.clone(),
        base.clone() + 1,
        base.to(torch.float64),
        base.to(torch.int32),
        base.clone().requires_grad_(not base.requires_grad) if floating else base.clone(),
        base.clone().reshape(-1),
        base.clone().t().contiguous().t() if base.dim() == 2 else base.clone().unsqueeze(0),
        base.clone().t() if base.dim() == 2 else base.clone()[None],
        torch.empty(base.shape, dtype=base.dtype, device="meta"),
        torch.nn.Parameter(base.clone(), requires_grad=base.requires_grad),
        torch.nn.Parameter(base.clone(), requires_grad=not base.requires_grad and floating),
        torch.nn.Buffer(base.clone()) if hasattr(torch.nn, "Buffer") else base.clone(),
        type("Sub", (torch.Tensor,), {})(base.clone()),
        torch.zeros(()),
        base.tolist() if base.device.type != "meta" else [],
        torch.ones(2, 3, 1)[..., 0],
    ]


@pytest.mark.parametrize("base", [torch.ones(2, 3), torch.ones(3, 2).t(), torch.ones(2, 3).requires_grad_(),
                                  torch.zeros(()), torch.ones(0, 4, dtype=torch.int64),
                                  torch.empty(2, 3, device="meta"), torch.nn.Parameter(torch.ones(2, 3))],
                         ids=["plain", "transposed", "requires_grad", "0-dim", "empty-int", "meta", "parameter"])
def test_tensors_differing_in_each_property(base):
    gs = GuardSet()
    gs.tensor_match(L_A, base)
    variants = _tensor_variants(base.detach() if type(base) is torch.Tensor else base.data)
    answers = agree(gs, locals_frames([base] + variants))
    assert answers[0] and not all(answers)


def test_symbolic_tensor_dims_are_left_to_the_shape_guards():
    def f(x):
        return x * 2

    probe = dynacap.optimize(f, backend="eager", dynamic=True)
    probe(torch.ones(5, 3))
    guard = _C.cache_entries(f.__code__)[0][0].compiled_guard
    shapes = ((5, 3), (9, 3), (5, 4), (1, 3), (0, 3), (5,), (5, 3, 1))
    frames = [({"x": torch.ones(*s)}, f.__globals__) for s in shapes] + [({"x": torch.ones(5, 3).t()}, {})]
    answers = [guard.fn(*fr) for fr in frames]
    assert answers == [bool(guard.python_fn(*fr)) for fr in frames]
    assert answers[:3] == [True, True, True] and not answers[5] and not answers[6]


def test_distinct_tensors():
    x, y = torch.ones(2), torch.ones(2)
    gs = GuardSet()
    gs.tensor_match(L_A, x)
    gs.tensor_match(LocalSource("b"), y)
    gs.distinct_tensors([L_A, LocalSource("b")])
    frames = [({"a": x, "b": y}, {}), ({"a": x, "b": x}, {}), ({"a": y, "b": x}, {}), ({"a": x}, {})]
    assert agree(gs, frames) == [True, False, True, False]


# ---------------------------------------------------------------------------------------------------
# Global state, weakly held objects, Python fallback, templates written elsewhere.
def test_global_state():
    gs = GuardSet()
    gs.global_state()
    frame = [({}, {})]
    assert agree(gs, frame) == [True]
    with torch.no_grad():
        assert agree(gs, frame) == [False]
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert agree(gs, frame) == [False]
    finally:
        torch.set_default_dtype(old)
    with torch.autocast("cpu"):
        assert agree(gs, frame) == [False]


def test_weakly_held_module_dies():
    m, other = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    gs = GuardSet()
    gs.id_match(L_A, m)
    c = compile_guards(gs, python=False)
    assert c.weakly_guarded() == [m]
    frames = locals_frames([m, other, None])
    assert agree(gs, frames) == [True, False, False, False]
    del frames, m
    gc.collect()
    assert c.weakly_guarded() == []
    # A dead reference reads as None, in both checks.
    assert agree(gs, locals_frames([other, None])) == [False, True, False]


def test_guards_the_program_does_not_know_run_in_python():
    gs = GuardSet()
    gs.type_match(L_A, 1)
    gs.relation("L['a'] < L['b']", [L_A, LocalSource("b")])
    gs.add("EQUALS_MATCH", L_A, "{s} % 3 == 1")
    c = compile_guards(gs, python=False)
    assert c.program == ["type(L['a']) is int", "python: L['a'] < L['b']", "python: L['a'] % 3 == 1"]
    frames = [({"a": 4, "b": 5}, {}), ({"a": 4, "b": 4}, {}), ({"a": 5, "b": 6}, {}), ({"a": 4.0, "b": 5}, {}),
              ({"a": 4}, {})]
    assert agree(gs, frames, in_c=False) == [True, False, False, False, False]


@pytest.mark.parametrize("same", [True, False])
def test_identity_of_two_sources(same):
    gs = GuardSet()
    gs.relation(f"(L['a'] is G['b']) is {same}", [L_A, GlobalSource("b")])
    o = object()
    frames = [({"a": o}, {"b": o}), ({"a": o}, {"b": object()}), ({"a": 1}, {"b": 1.0}), ({"a": o}, {}), ({}, {"b": o})]
    assert agree(gs, frames) == [same, not same, not same, False, False]


class WithClassAttr:
    x = 1


@pytest.mark.parametrize("template", [
    "'x' not in {s}.__dict__ and not hasattr(type({s}), 'x')",
    "'x' not in object.__getattribute__({s}, '__dict__') and not hasattr(type({s}), 'x')",
    "not hasattr(type({s}), 'x')",
])
def test_missing_attribute_templates(template):
    gs = GuardSet()
    gs.add("NOT_PRESENT", L_A, template)
    hooked = Hooked()
    object.__setattr__(hooked, "x", 2)
    assert agree(gs, locals_frames([Box(), Box(x=1), WithClassAttr(), Hooked(), hooked, 3, [1]]))[0]


@pytest.mark.parametrize("own", [True, False])
def test_module_own_attribute_template(own):
    n = repr("w")
    gs = GuardSet()
    gs.add("EQUALS_MATCH", L_A, f"({n} in {{s}}._parameters or {n} in {{s}}._buffers or {n} in {{s}}._modules "
                                f"or {n} in {{s}}.__dict__) is {own}")
    plain, param, buf, child, attr = (torch.nn.Module() for _ in range(5))
    param.w = torch.nn.Parameter(torch.ones(1))
    buf.register_buffer("w", torch.ones(1))
    child.w = torch.nn.ReLU()
    attr.w = 3
    answers = agree(gs, locals_frames([plain, param, buf, child, attr, Box(w=1)]))
    assert answers[:5] == [not own, own, own, own, own]


def test_unknown_source_is_left_to_python():
    class Doubled(LocalSource):
        def expr(self):
            return f"(L[{self.name!r}] * 2)"

    gs = GuardSet()
    gs.equals_match(Doubled("a"), 4)
    assert compile_guards(gs, python=False).program == ["python: (L['a'] * 2) == 4"]
    assert agree(gs, locals_frames([2, 3, 2.0]), in_c=False) == [True, False, False, False]


def entry_guard(fn, *args):
    dynacap.optimize(fn, backend="eager")(*args)
    entries = _C.cache_entries(fn.__code__)
    assert entries
    return entries[0][0].compiled_guard


def frames_of(fn, *calls):
    return [(dict(inspect.signature(fn).bind(*args).arguments), fn.__globals__) for args in calls]


def _uses_module(m, x):
    return m(x)


def test_module_structure_and_hooks_end_to_end():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    x = torch.ones(1, 2)
    guard = entry_guard(_uses_module, m, x)
    assert not [line for line in guard.program if line.startswith("python:")], guard.program
    hooked = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    hooked.register_forward_hook(lambda *a: None)
    grown = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.ReLU())
    buffered = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    buffered.register_buffer("extra", torch.ones(1))
    patched = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    patched.forward = lambda x: x
    calls = [(m, x), (torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()), x), (hooked, x), (grown, x),
             (buffered, x), (patched, x), (m, torch.ones(2, 2))]
    answers = [guard.fn(*fr) for fr in frames_of(_uses_module, *calls)]
    assert answers == [bool(guard.python_fn(*fr)) for fr in frames_of(_uses_module, *calls)]
    assert answers[0] and not any(answers[2:])


def _calls_function(fn, x):
    return fn(x) + len([1])


def _one(x):
    return x + 1


def _two(x):
    return x + 2


def test_functions_and_builtins_end_to_end():
    x = torch.ones(2)
    guard = entry_guard(_calls_function, _one, x)
    assert not [line for line in guard.program if line.startswith("python:")], guard.program
    copy = type(_one)(_one.__code__, _one.__globals__)
    frames = frames_of(_calls_function, (_one, x), (copy, x), (_two, x), (len, x))
    answers = [guard.fn(*fr) for fr in frames]
    assert answers == [bool(guard.python_fn(*fr)) for fr in frames]
    assert answers[0] and not answers[2] and not answers[3]
    shadowed = dict(_calls_function.__globals__, len=abs)
    assert guard.fn(frames[0][0], shadowed) is bool(guard.python_fn(frames[0][0], shadowed)) is False


# ---------------------------------------------------------------------------------------------------
# The hook: the program is the default, recompiles happen, most-recently-used order.
def test_the_program_is_the_default_and_the_python_check_a_switch(monkeypatch):
    gs = GuardSet()
    gs.type_match(L_A, 1)
    assert type(compile_guards(gs).fn) is _C.GuardProgram
    monkeypatch.setenv("DYNACAP_PYTHON_GUARDS", "1")
    assert type(compile_guards(gs).fn) is not _C.GuardProgram


def _by_name(x, name):
    return x * len(name)


def test_entries_in_most_recently_used_order():
    x = torch.ones(2)
    fn = dynacap.optimize(_by_name, backend="eager")
    names = ("a", "bb", "ccc")
    for name in names:
        fn(x, name)

    def order():
        out = []
        for guard, _, _ in _C.cache_entries(_by_name.__code__):
            out.append(next(n for n in names if guard({"x": x, "name": n}, globals())))
        return out

    assert order() == ["ccc", "bb", "a"]  # new entries go first
    fn(x, "a")
    assert order() == ["a", "ccc", "bb"]  # a hit moves its entry to the front
    fn(x, "bb")
    assert order() == ["bb", "a", "ccc"]


def test_compiled_guard_and_program_are_collected():
    gs = GuardSet()
    gs.type_match(L_A, 1)
    c = compile_guards(gs, python=False)
    ref = weakref.ref(c)
    del c
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("steps, checks", [
    (((SRC_ATTR, 0, "x"),), ()),                       # a step reading from itself
    (((SRC_LOCAL, -1, "a"),), ((CK_TYPE, 1, int, None, ()),)),  # a check past the steps
    (((SRC_LOCAL, -1, "a"),), ((CK_TYPE, 0, 3, None, ()),)),    # a type that is not a type
    (((SRC_LOCAL, -1, "a"),), ((CK_TENSOR, 0, int, True, (0, 0, -2, 0)),)),  # a tensor check on ints
    (((SRC_LOCAL, -1, "a"),), ((CK_TENSOR, 0, torch.Tensor, True, (0, 0, -2, 2, 1)),)),  # too few dims
    (((99, -1, "a"),), ()),
])
def test_malformed_programs_are_refused(steps, checks):
    with pytest.raises((ValueError, TypeError)):
        _C.GuardProgram(steps, checks, None)


def test_a_read_that_runs_the_program_again():
    holder = []

    class Again:
        @property
        def x(self):
            return holder[0].fn({"a": 5}, {})  # the inner run fails: 5 has no attribute x

    gs = GuardSet()
    gs.equals_match(AttrSource(L_A, "x"), False)
    holder.append(compile_guards(gs, python=False))
    assert agree(gs, locals_frames([Again(), 5])) == [True, False, False]


SHAPE_EXPRESSIONS = [
    "2 <= L['a'].size()[0]",
    "L['a'].stride()[0] == 2*L['a'].size()[1]",
    "(-1) + L['a'].size()[1] <= L['a'].size()[0]*L['n']",
    "L['a'].size()[0] // L['n'] == 1 and L['a'].size()[0] % L['n'] >= 0",
    "0 <= -(L['n'] % 4) + L['a'].size()[1] - L['n'] * L['n'] < 100",
    "L['n'] * 4611686018427387904 != 3",  # past int64 for |n| >= 2: Python's integers decide
    "L['n']",
]


@pytest.mark.parametrize("expr", SHAPE_EXPRESSIONS)
def test_symbolic_shape_expressions_in_c(expr):
    gs = GuardSet()
    gs.type_match(LocalSource("n"), 1)
    gs.tensor_match(L_A, torch.ones(4, 3, 2)[:, :, 0], torch.empty(4, 3, 2)[:, :, 0])
    gs.relation(expr, [L_A, LocalSource("n")], kind="SYMBOLIC_SHAPE")
    a = torch.ones(4, 3, 2)[:, :, 0]
    frames = [({"a": a, "n": n}, {}) for n in (0, 1, 2, 3, 4, 5, -1, -3, -4, 2**62, -2**63, 2**70, True)]
    frames += [({"a": torch.ones(4, 3), "n": 3}, {}), ({"a": a}, {})]
    answers = agree(gs, frames)
    assert True in answers and False in answers


def test_symbolic_shape_expression_the_program_cannot_read_runs_in_python():
    gs = GuardSet()
    gs.type_match(LocalSource("n"), 1)
    gs.relation("L['n'] ** 2 >= 4", [LocalSource("n")], kind="SYMBOLIC_SHAPE")
    gs.relation("L['m'] >= 4", [LocalSource("m")], kind="SYMBOLIC_SHAPE")  # no int check of L['m'] in C
    assert compile_guards(gs, python=False).program == [
        "type(L['n']) is int", "python: L['n'] ** 2 >= 4", "python: L['m'] >= 4"]
    assert agree(gs, [({"n": n, "m": m}, {}) for n in (1, 2, -3) for m in (3, 4.0, "x")], in_c=False)


@pytest.mark.parametrize("present", [True, False])
def test_items_keyed_by_an_object_from_the_frame(present):
    from dynacap.source import KeyedItemSource

    k1, k2 = torch.ones(1), torch.ones(1)
    key = ItemSource(LocalSource("keys"), 0)
    gs = GuardSet()
    gs.relation(f"({key.expr()} in {L_A.expr()}) is {present}", [L_A, key])
    if present:
        gs.equals_match(KeyedItemSource(L_A, key), 3)
    frames = [({"a": {k1: 3}, "keys": [k1]}, {}), ({"a": {k1: 4}, "keys": [k1]}, {}), ({"a": {k2: 3}, "keys": [k1]}, {}),
              ({"a": {}, "keys": [k1]}, {}), ({"a": {k1: 3}, "keys": []}, {}), ({"a": [k1], "keys": [k1]}, {}),
              ({"a": {k1: 3}}, {})]
    answers = agree(gs, frames)
    assert answers[0] is present and answers[3] is not present


def test_attribute_identity_template():
    gs = GuardSet()
    gs.add("ID_MATCH", ClassSource(Box), "{s}.__init__ is {attr}", attr=Box.__init__)
    assert agree(gs, [({}, {})]) == [True]
    gs = GuardSet()
    gs.add("ID_MATCH", L_A, "{s}.run is {attr}", attr=len)
    assert agree(gs, locals_frames([Box(run=len), Box(run=abs), Box()])) == [True, False, False, False]


def test_steps_are_shared_by_what_they_read_and_told_apart_as_their_expressions_are():
    """One step per read, whichever source objects ask for it (fresh or shared, a ``DictEntrySource`` or the
    item of an attribute); keys equal under ``==`` but written differently (``1``/``True``, ``0.0``/``-0.0``)
    are separate steps, as the expressions of their sources are."""
    from dynacap.guards.program import SRC_ITEM, lower

    gs = GuardSet()
    for key in (1, True, 1, 0.0, -0.0, "1"):
        gs.type_match(ItemSource(L_A, key), 5)
    gs.type_match(DictEntrySource(L_A, "_modules", "m"), 5)
    gs.equals_match(ItemSource(AttrSource(LocalSource("a"), "_modules"), "m"), 5)
    gs.length(AttrSource(L_A, "_modules"), {"m": 5})
    steps = lower(list(gs)).steps
    assert [(op, base, type(arg), repr(arg)) for op, base, arg in steps] == [
        (SRC_LOCAL, -1, str, "'a'"), (SRC_ITEM, 0, int, "1"), (SRC_ITEM, 0, bool, "True"),
        (SRC_ITEM, 0, float, "0.0"), (SRC_ITEM, 0, float, "-0.0"), (SRC_ITEM, 0, str, "'1'"),
        (SRC_ATTR, 0, str, "'_modules'"), (SRC_ITEM, 6, str, "'m'")]
    class Items(dict):
        pass

    def items(modules):
        d = Items({1: 5, 0.0: 5, "1": 5})
        d._modules = modules
        return d

    assert agree(gs, locals_frames([items({"m": 5}), items({"m": 5.0}), items({"m": 5, "n": 5}), items({}),
                                    {1: 5, 0.0: 5, "1": 5}])) == [True, False, False, False, False, False]
