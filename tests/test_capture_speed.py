"""Capture-speed shortcuts must never change an answer: each is checked against the slow path.

- the guard text next to a C program is generated when first read (``CompiledGuard.source``): it must
  be the text generated at capture, for the guards of that capture only;
- graph inputs read through a shared prefix load it once per call (``rewrite._load_inputs``): a
  prefix that changes between calls (a child module swapped for another instance of its class, a
  list item replaced) must be read anew;
- a tensor reached two ways is one placeholder (``GraphBuilder._input_of_tensor``), and placeholders
  stay in input order (``GraphBuilder._last_placeholder``);
- the ``GraphModule`` is generated once (``GraphBuilder.finish``): its code is its graph's;
- a fake result made again from recorded metadata (``Propagation.propagate``) must be what dispatching
  the operation gives (shape, strides, dtype, device, view of a new base, memory format), and results
  that share an argument's storage or need grad are never made again from that metadata (the result
  rules of ``graph/results.py`` are checked in ``test_result_rules.py``); fakes made directly
  (``fakes.new_fake``, ``GraphBuilder._plain_fake``) are the constructor's and the converter's;
- ``nn.Identity`` layers return their argument without a frame;
- an operation that returned one of its arguments (in place, ``dropout`` in eval mode) returns that
  argument again with its version bumped as dispatching does, never with gradients recorded nor after
  it changed the argument's metadata or storage; views taken from their kernels (``Propagation._view_of``,
  tuples of views included) and views made without dispatching (``graph/fakes.py``'s ``make_view``) are the
  dispatched views: metadata, base, storage, version counter.
"""
from __future__ import annotations

import dis

import pytest
import torch

import dynacap
from dynacap import hook
from dynacap.guards import GuardSet, compile_guards
from dynacap.source import AttrSource, ItemSource, LocalSource

from differential import CountingBackend, run_differential


@pytest.fixture(autouse=True)
def c_guards_by_default(monkeypatch):
    """The lazy text exists only next to the C program (CI may set the debugging switch)."""
    monkeypatch.delenv("DYNACAP_PYTHON_GUARDS", raising=False)


def _guard_set() -> GuardSet:
    gs = GuardSet()
    gs.global_state()
    gs.type_match(LocalSource("a"), 3)
    gs.equals_match(LocalSource("a"), 3)
    gs.type_match(AttrSource(LocalSource("o"), "w"), [1])
    gs.length(AttrSource(LocalSource("o"), "w"), [1])
    gs.equals_match(ItemSource(AttrSource(LocalSource("o"), "w"), 0), 1)
    gs.tensor_match(LocalSource("t"), torch.ones(2, 3))
    return gs


class _Obj:
    def __init__(self, w):
        self.w = w


def test_guard_text_generated_later_is_the_text_of_the_capture():
    gs = _guard_set()
    eager_text = compile_guards(gs, python=True).source
    c = compile_guards(gs, python=False)
    gs.equals_match(LocalSource("b"), 7)  # the trace's set may grow afterwards: not this entry's
    assert c.source == eager_text
    assert "L['b']" not in c.source
    frames = [({"a": 3, "o": _Obj([1]), "t": torch.ones(2, 3)}, {}),
              ({"a": 4, "o": _Obj([1]), "t": torch.ones(2, 3)}, {}),
              ({"a": 3, "o": _Obj([2]), "t": torch.ones(2, 3)}, {}),
              ({"a": 3, "o": _Obj([1]), "t": torch.ones(3, 2)}, {})]
    assert [c.fn(*f) for f in frames] == [bool(c.python_fn(*f)) for f in frames] == [True, False, False, False]
    assert c.source == eager_text  # compiling the Python check keeps the same text


def test_captured_entry_guard_text_matches_a_fresh_generation():
    def f(x, n):
        return x * n

    opt = dynacap.optimize(f, backend="eager")
    opt(torch.ones(3), 2)
    guard = hook.cache_entries(f.__code__)[0][0].compiled_guard
    text = guard.source
    assert "L['n']" in text and "L['x']" in text
    assert text == compile_guards(guard.guards, python=True).source
    assert guard.source is text  # generated once
    assert guard.python_fn({"x": torch.ones(3), "n": 2}, f.__globals__)
    assert not guard.python_fn({"x": torch.ones(3), "n": 3}, f.__globals__)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(self.conv(x)).relu()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stage = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.stage(x))


def _rewritten(fn_code):
    return hook.cache_entries(fn_code)[0][1]


def test_shared_prefix_is_read_once_per_call():
    net = Net().eval()
    backend = CountingBackend()
    opt = dynacap.optimize(net, backend=backend)
    with torch.no_grad():
        x = torch.randn(3, 4)
        torch.testing.assert_close(opt(x), net(x))
    code = _rewritten(Net.forward.__code__)
    reads = [i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_ATTR"]
    # One read of ``_modules`` per module on the way (self -> stage -> 0/1 -> conv/norm, head), not one per parameter.
    assert reads.count("_modules") <= 8, reads
    assert reads.count("_parameters") == 10  # 5 layers, weight and bias each


def test_shared_prefix_follows_a_child_swapped_between_calls():
    """Instances of one class share a graph: the rewritten code must read the child in place now."""
    net = Net().eval()
    backend = CountingBackend()
    opt = dynacap.optimize(net, backend=backend)
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(opt(x), net(x))
        for _ in range(3):
            net.stage[1] = Block().eval()  # same class, new parameters
            net.stage[0].conv = torch.nn.Linear(4, 4)
            torch.testing.assert_close(opt(x), net(x))
    assert len(backend.graphs) == 1


def test_shared_prefix_follows_a_list_item_replaced_between_calls():
    def f(box):
        return box.items[0].w * box.items[0].b + box.items[1].w

    class Box:
        pass

    def make():
        box = Box()
        box.items = [_Obj(torch.randn(3)), _Obj(torch.randn(3))]
        for item in box.items:
            item.b = torch.randn(3)
        return box

    box = make()
    run_differential(f, box)
    backend = CountingBackend()
    opt = dynacap.optimize(f, backend=backend)
    for _ in range(3):
        torch.testing.assert_close(opt(box), f(box))
        fresh = make()
        box.items[0] = fresh.items[0]
        box.items[1].w = fresh.items[1].w
    assert len(backend.graphs) == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_one_tensor_reached_two_ways_and_input_order(backend):
    def f(a, b, c, d):
        return a * 1 + b * 2 + c * 3 + d * 4

    x, y, z = torch.randn(3), torch.randn(3), torch.randn(3)
    counting = CountingBackend(backend)
    opt = dynacap.optimize(f, backend=counting)
    for args in [(x, y, x, z), (x, y, x, z), (z, y, z, x), (x, x, y, z)]:
        torch.testing.assert_close(opt(*args), f(*args))
    placeholders = [n.target for n in counting.graphs[0].graph.nodes if n.op == "placeholder"]
    assert placeholders == ["L_a", "L_b", "L_d"]  # c is a: one placeholder, in the order first met
    assert len(counting.graphs) == 2  # the aliasing changed once


def test_graph_module_code_is_its_graph():
    def f(x):
        return torch.relu(x) + x.sum()

    counting = CountingBackend()
    dynacap.optimize(f, backend=counting)(torch.randn(4))
    gm = counting.graphs[0]
    assert gm.code == gm.graph.python_code("self").src


def test_source_step_memo_never_answers_for_another_source():
    """The lowering's memo keys on ``id(source)``: a source freed and another made at its address must not
    inherit its step (the memo holds the sources it was asked about)."""
    from dynacap.guards.program import SRC_ITEM, _Builder

    builder = _Builder(None)
    for i in range(200):
        source = ItemSource(AttrSource(LocalSource("o"), f"w{i % 7}"), i)
        op, base, arg = builder.out.steps[builder.source(source)]
        assert (op, arg) == (SRC_ITEM, i) and builder.out.steps[base][2] == f"w{i % 7}"
        del source  # its address is free for the next one


def test_guard_program_is_the_same_for_shared_and_fresh_source_objects():
    def build(shared: bool) -> list:
        gs = GuardSet()
        base = AttrSource(LocalSource("o"), "w")
        for i in range(5):
            where = base if shared else AttrSource(LocalSource("o"), "w")
            gs.type_match(ItemSource(where, i), 1)
            gs.equals_match(ItemSource(where, i), i)
        return compile_guards(gs, python=False).program

    assert build(True) == build(False)


def test_shared_prefix_is_not_kept_alive_past_the_graph_call():
    """A child the frame drops after the graph dies there, as in eager (its weakref callback runs)."""
    import weakref

    died = []

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))

        def forward(self, x):
            y = self.inner(x)
            self.inner = None
            print(len(died))
            return y

    def run(wrap):
        died.clear()
        m = Outer()
        ref = weakref.ref(m.inner, lambda _: died.append(1))
        return wrap(m)(torch.ones(2, 3)).shape, ref

    import contextlib
    import io

    for wrap in (lambda m: m, lambda m: dynacap.optimize(m, backend="eager")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            run(wrap)
        assert out.getvalue() == "1\n", out.getvalue()


def _metadata(t):
    return (t.shape, t.stride(), t.dtype, t.device, t.requires_grad, t._is_view(), t.storage_offset(), type(t))


F = torch.nn.functional

#: (operation, argument shapes, constants after the tensors): fresh results, views of fresh ones, arguments.
_OPS = [
    (F.linear, [(2, 5, 4), (3, 4), (3,)], []),  # 3-d input: a view of a 2-d result
    (F.linear, [(2, 2, 5, 4), (3, 4)], []),
    (torch.add, [(3, 4), (4,)], []),
    (F.layer_norm, [(2, 6)], [(6,)]),
    (F.gelu, [(2, 3)], []),
    (F.dropout, [(2, 3)], [0.5, False]),  # the input itself
    (torch.relu_, [(2, 3)], []),  # in place: the input itself
    ("contiguous", [(2, 3)], []),  # the input itself (a method: ``call_method``)
    ("t", [(2, 3)], []),  # a view of the input
    ("clone", [(2, 3)], []),
    (torch.mul, [(2, 3)], [2]),
    (torch.mul, [(2, 3)], [2.0]),
    (torch.zeros_like, [(2, 3)], []),
]


@pytest.mark.parametrize("op,shapes,constants", _OPS, ids=[f"{getattr(op, '__name__', op)}{i}" for i, (op, _, _) in enumerate(_OPS)])
@pytest.mark.parametrize("grad", [False, True])
def test_fake_result_made_again_is_the_dispatched_one(op, shapes, constants, grad):
    from dynacap.graph import GraphBuilder
    from dynacap.values.constant import ConstantValue

    builder = GraphBuilder()
    with builder.propagating(), torch.set_grad_enabled(grad):
        results = []
        for call in range(3):
            args = [builder.input_tensor(LocalSource(f"t{call}_{i}"), torch.randn(shape, requires_grad=grad and i > 0))
                    for i, shape in enumerate(shapes)]
            args += [ConstantValue(c) for c in constants]
            kind = "call_method" if isinstance(op, str) else "call_function"
            results.append((builder.call(kind, op, args, {}, str(op)), args))
    (first, args0), *later = results
    for result, args in later:
        assert _metadata(result.fake) == _metadata(first.fake)
        assert (result.fake is args[0].fake) == (first.fake is args0[0].fake)
        assert (result.fake.untyped_storage()._cdata == args[0].fake.untyped_storage()._cdata) == \
            (first.fake.untyped_storage()._cdata == args0[0].fake.untyped_storage()._cdata)
    recorded = bool(builder._propagation._results)
    fresh = first.fake.untyped_storage()._cdata != args0[0].fake.untyped_storage()._cdata
    assert recorded == (fresh and not first.fake.requires_grad)


#: (operation, argument shapes, constants after the tensors, whether later calls skip dispatching):
#: operations returning one of their arguments.
_RETURNING = [
    (torch.relu_, [(2, 3)], [], True),
    ("add_", [(2, 3), (3,)], [], True),
    ("mul_", [(2, 3)], [2.0], True),
    ("copy_", [(2, 3), (2, 3)], [], True),
    (F.dropout, [(2, 3)], [0.5, False], True),  # the input itself, unchanged
    ("contiguous", [(2, 3)], [], True),
    ("t_", [(2, 3)], [], False),  # in place, but a view op: the argument's metadata changes
    ("unsqueeze_", [(2, 3)], [0], False),
    ("set_", [(2, 3), (2, 3)], [], False),  # the same metadata over another storage
    ("resize_", [(2, 3)], [(6,)], False),
]


@pytest.mark.parametrize("op,shapes,constants,recorded", _RETURNING,
                         ids=[f"{getattr(op, '__name__', op)}" for op, *_ in _RETURNING])
@pytest.mark.parametrize("grad", [False, True])
def test_operation_returning_an_argument_is_the_dispatched_one(op, shapes, constants, recorded, grad):
    """Later calls of an operation that returned one of its arguments give what dispatching it gives:
    the same argument (or another), the same metadata, storages and version counts."""
    from dynacap.graph import GraphBuilder
    from dynacap.values.constant import ConstantValue

    builder = GraphBuilder()
    kind = "call_method" if isinstance(op, str) else "call_function"
    with builder.propagating(), torch.set_grad_enabled(grad):
        for call in range(3):
            reals = [torch.randn(shape) for shape in shapes]
            args = [builder.input_tensor(LocalSource(f"t{call}_{i}"), r) for i, r in enumerate(reals)]
            fakes = [a.fake for a in args]
            before = [f._version for f in fakes]
            result = builder.call(kind, op, args + [ConstantValue(c) for c in constants], {}, str(op)).fake
            others = [builder.fake_mode.from_tensor(r.clone()) for r in reals]
            expected = (getattr(others[0], op)(*others[1:], *constants) if isinstance(op, str)
                        else op(*others, *constants))
            assert [result is f for f in fakes] == [expected is f for f in others]
            assert _metadata(result) == _metadata(expected)
            assert [f._version - v for f, v in zip(fakes, before)] == [f._version for f in others]
            assert [result.untyped_storage()._cdata == f.untyped_storage()._cdata for f in fakes] == \
                [expected.untyped_storage()._cdata == f.untyped_storage()._cdata for f in others]
    assert bool(builder._propagation._returns) == recorded


def test_in_place_operation_on_a_leaf_that_needs_grad_still_raises():
    """An in-place kernel accepted on a tensor computed from a parameter is refused on the parameter
    itself (same metadata, requires_grad included): with gradients recorded nothing is remembered."""
    from dynacap.errors import GraphBreak
    from dynacap.graph import GraphBuilder
    from dynacap.values.constant import ConstantValue

    builder = GraphBuilder()
    with builder.propagating():
        w = builder.input_tensor(LocalSource("w"), torch.randn(2, 3, requires_grad=True))
        y = builder.call("call_function", torch.mul, [w, ConstantValue(2.0)], {}, "mul")
        builder.call("call_function", torch.relu_, [y], {}, "relu_")
        with pytest.raises(GraphBreak, match="leaf Variable"):
            builder.call("call_function", torch.relu_, [w], {}, "relu_")
    assert not builder._propagation._returns


#: Inputs of the view tests: contiguous, transposed, sliced (an offset), size-1 dims, expanded, a view of
#: a view, channels_last.
_VIEW_INPUTS = [
    lambda: torch.randn(2, 3, 4),
    lambda: torch.randn(4, 3, 2).permute(2, 1, 0),
    lambda: torch.randn(2, 3, 6)[..., 1:5],
    lambda: torch.randn(2, 1, 3, 4),
    lambda: torch.randn(1, 3, 1).expand(2, 3, 4),
    lambda: torch.randn(6, 4).view(2, 3, 4)[1:],
    lambda: torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
    lambda: torch.randn(1, 8, 1, 1),
]

#: (target, arguments after the tensor): each view operation the builder takes from its kernel.
_VIEW_CALLS = [
    ("view", (-1,)), ("view", (6, 4)), ("view", (2, 3, 4)), ("view", (torch.int32,)), ("reshape", (4, -1)),
    ("reshape", (-1,)), ("reshape", (2, 1, 12)), ("flatten", ()), ("flatten", (1,)), ("flatten", (0, 1)),
    ("unflatten", (-1, (2, -1))), ("squeeze", ()), ("squeeze", (1,)), ("unsqueeze", (0,)), ("unsqueeze", (-1,)),
    ("transpose", (0, -1)), ("permute", ((2, 0, 1),)), ("expand", (5, -1, -1, -1)), ("t", ()),
    (torch.reshape, ((-1, 2),)), (torch.flatten, (1,)), (torch.squeeze, ()), (torch.unsqueeze, (1,)),
    (torch.transpose, (1, 2)), (torch.permute, ((1, 0, 2),)), (torch.t, ()),
    ("unbind", ()), ("unbind", (1,)), ("split", (2,)), ("chunk", (2, 1)), (torch.unbind, (-1,)),
    (torch.split, (1, 2)), (torch.chunk, (3, -1)),
]


@pytest.mark.parametrize("call", range(len(_VIEW_CALLS)),
                         ids=[f"{getattr(t, '__name__', t)}{i}" for i, (t, _) in enumerate(_VIEW_CALLS)])
@pytest.mark.parametrize("grad", [False, True])
def test_view_taken_from_its_kernel_is_the_dispatched_view(call, grad):
    """A view operation's fake result made from its kernel's view (``Propagation._view_of``, then made
    again from the memo) is the dispatched one: sizes, strides, offset, dtype, a view of the same base
    sharing its storage and version counter; what dispatching refuses is refused."""
    from dynacap.errors import GraphBreak
    from dynacap.graph import GraphBuilder

    target, rest = _VIEW_CALLS[call]
    kind = "call_method" if isinstance(target, str) else "call_function"
    builder = GraphBuilder()
    viewed = False  # whether some dispatched result was a view of its argument that autograd does not record
    with builder.propagating(), torch.set_grad_enabled(grad):
        for i, make in enumerate(_VIEW_INPUTS * 2):  # twice: made from the kernel, then from the memo
            real = make().requires_grad_(grad and i % 2 == 0)
            x = builder.input_tensor(LocalSource(f"x{i}"), real)
            other = builder.fake_mode.from_tensor(make().requires_grad_(real.requires_grad))
            try:
                expected = getattr(other, target)(*rest) if kind == "call_method" else target(other, *rest)
            except Exception:
                with pytest.raises(GraphBreak):
                    builder.call(kind, target, [x, *rest], {}, str(target))
                continue
            result = builder.call(kind, target, [x, *rest], {}, str(target))
            if type(expected) is tuple:  # a tuple of views
                assert [_metadata(item.fake) for item in result.items] == [_metadata(e) for e in expected]
                assert all(item.fake._base is (x.fake._base if x.fake._is_view() else x.fake) for item in result.items)
                viewed |= not grad
                continue
            got = result.fake
            assert _metadata(got) == _metadata(expected)
            assert (got.untyped_storage()._cdata == x.fake.untyped_storage()._cdata) == \
                (expected.untyped_storage()._cdata == other.untyped_storage()._cdata)
            assert (got is x.fake) == (expected is other)
            viewed |= (expected._is_view() and expected is not other and expected.dtype == other.dtype
                       and not (grad and real.requires_grad))
            if expected._is_view():
                assert got._base is (x.fake._base if x.fake._is_view() else x.fake)
                assert _metadata(got._base) == _metadata(expected._base)
                if not real.requires_grad:
                    version = x.fake._version
                    with torch.no_grad():
                        got.add_(1)
                    assert x.fake._version == version + 1  # one counter, as for the dispatched view
    assert bool(builder._propagation._views) == viewed


def test_views_of_a_transformer_and_convnext_block_are_taken_from_kernels():
    from dynacap.graph import GraphBuilder

    builder = GraphBuilder()
    with builder.propagating(), torch.no_grad():
        gamma = builder.input_tensor(LocalSource("gamma"), torch.randn(8))
        builder.call("call_method", "reshape", [gamma, 1, -1, 1, 1], {}, "reshape")
        pooled = builder.input_tensor(LocalSource("pooled"), torch.randn(1, 8, 1, 1))
        builder.call("call_function", torch.flatten, [pooled, 1], {}, "flatten")
        qkv = builder.input_tensor(LocalSource("qkv"), torch.randn(1, 5, 24))
        builder.call("call_method", "reshape", [qkv, 1, 5, 3, 2, 4], {}, "reshape")
    assert len(builder._propagation._views) == 3


def test_view_made_without_dispatching_is_the_dispatched_as_strided(monkeypatch):
    """``fakes.make_view`` gives what dispatching ``as_strided`` gives (a view of the argument's base over
    its storage, one version counter); a call that raises leaves nothing prepared for the next one."""
    from torch._subclasses.fake_tensor import FakeTensor

    from dynacap.graph import GraphBuilder
    from dynacap.graph.fakes import make_view

    builder = GraphBuilder()
    mode = builder.fake_mode
    with builder.propagating(), torch.no_grad():
        base = builder.fake_of(torch.randn(6, 8))
        x = base[1:]  # a view with an offset
        for shape, stride, offset in [((5, 8), (8, 1), 8), ((8, 5), (1, 8), 8), ((2, 2, 4), (16, 4, 1), 12)]:
            got, expected = make_view(mode, x, shape, stride, offset), x.as_strided(shape, stride, offset)
            assert _metadata(got) == _metadata(expected)
            assert got._base is expected._base is base
            assert got.untyped_storage()._cdata == base.untyped_storage()._cdata
            version = base._version
            got.add_(1)
            assert x._version == base._version == version + 1
        def refuse(*args):
            raise RuntimeError("refused before dispatching")

        with monkeypatch.context() as patch:
            patch.setattr(FakeTensor, "as_strided", refuse, raising=False)
            with pytest.raises(RuntimeError, match="refused"):
                make_view(mode, x, (2, 8), (8, 1), 8)
        assert mode._prepared is None
        other = x.as_strided((2, 8), (8, 1), 16)
        assert other._base is base and other.shape == (2, 8)


def test_fake_results_are_dispatched_again_under_autocast():
    from dynacap.graph import GraphBuilder

    builder = GraphBuilder()
    with builder.propagating(), torch.no_grad():
        def linear(i):
            x = builder.input_tensor(LocalSource(f"x{i}"), torch.randn(2, 4))
            w = builder.input_tensor(LocalSource(f"w{i}"), torch.randn(3, 4))
            return builder.call("call_function", F.linear, [x, w], {}, "linear").fake

        assert linear(0).dtype == torch.float32
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert linear(1).dtype == torch.bfloat16
        assert linear(2).dtype == torch.float32


def _fake_facts(t):
    return (*_metadata(t), t.is_leaf, getattr(t, "_is_param", False), t.untyped_storage().nbytes())


@pytest.mark.parametrize("make", [
    lambda: torch.nn.Parameter(torch.randn(3, 4)),
    lambda: torch.nn.Parameter(torch.randn(3, 4), requires_grad=False),
    lambda: torch.randn(5),
    lambda: torch.zeros((), dtype=torch.int64),
    lambda: torch.randn(4, 3).t(),  # a view: described in full
    lambda: torch.empty(4, 5).as_strided((4, 5), (1, 4)),
    lambda: torch.nn.Parameter(torch.randn(0, 3)),
    lambda: torch.randn(6)[2:],  # an offset into a larger storage
])
def test_plain_fake_is_the_converters_fake(make):
    from dynacap.graph import GraphBuilder

    t = make()
    direct, converted = GraphBuilder(), GraphBuilder()
    made = direct.fake_of(t)
    assert _fake_facts(made) == _fake_facts(converted.fake_mode.from_tensor(t, static_shapes=True))
    assert direct.fake_mode.from_tensor(t, static_shapes=True) is made  # the converter knows it


def test_plain_fake_is_never_made_for_a_shared_storage():
    """Tensors that share a storage keep sharing it as fakes (an in-place op through one is seen by the other)."""
    from dynacap.graph import GraphBuilder

    w = torch.randn(4, 4)
    alias = w.view(16)
    builder = GraphBuilder()
    assert builder._plain_fake(w) is None
    a, b = builder.fake_of(w), builder.fake_of(alias)
    assert a.untyped_storage()._cdata == b.untyped_storage()._cdata
    grad = torch.nn.Parameter(torch.randn(2))
    grad.grad = torch.ones(2)
    assert builder._plain_fake(grad) is None  # its fake carries a fake gradient


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tied_and_aliased_parameters(backend):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4, bias=False)
            self.b = torch.nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("flat", torch.zeros(8))
            self.register_buffer("head", self.flat[:4])

        def forward(self, x):
            self.head.add_(1)
            return self.b(self.a(x)) + self.flat.sum()

    torch.manual_seed(0)
    eager = Tied()
    torch.manual_seed(0)
    captured = Tied()
    opt = dynacap.optimize(captured, backend=backend)
    x = torch.randn(2, 4)
    for _ in range(3):
        torch.testing.assert_close(opt(x), eager(x))
        torch.testing.assert_close(captured.flat, eager.flat)
    assert captured.head.untyped_storage()._cdata == captured.flat.untyped_storage()._cdata


def test_build_query_under_the_trace_fake_mode_is_torchs_answer(monkeypatch):
    """The convolution backend choice asks ``_nnpack_available`` per new shape: the trace's fake mode
    answers it by running it, never through fake dispatch, and with torch's own answer."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from dynacap.graph import GraphBuilder

    expected = torch._nnpack_available()
    builder = GraphBuilder()
    monkeypatch.setattr(FakeTensorMode, "__torch_dispatch__", lambda *a, **k: pytest.fail("dispatched"))
    with builder.propagating():
        assert torch.ops.aten._nnpack_available.default() == expected


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
@pytest.mark.parametrize("unsafe", [False, True])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_new_fake_is_the_constructors_fake(device, unsafe, requires_grad):
    """``fakes.new_fake`` makes what ``FakeTensor(mode, meta, device)`` makes: type, attributes, dispatch
    keys, device, requires_grad, and the same answer to a data-pointer access."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from dynacap.graph.fakes import new_fake

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode._allow_unsafe_data_ptr_access = unsafe
    meta = torch.empty_strided((2, 3), (1, 2), device="meta", requires_grad=requires_grad)
    made, official = new_fake(mode, meta, torch.device(device)), FakeTensor(mode, meta, torch.device(device))
    assert type(made) is type(official) is FakeTensor
    assert made.__dict__ == official.__dict__
    assert torch._C._dispatch_keys(made) == torch._C._dispatch_keys(official)
    assert (made.device, made.requires_grad, made.shape, made.stride()) == \
        (official.device, official.requires_grad, official.shape, official.stride())

    def data_pointer(t):
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns once per process: not comparable
                return t.untyped_storage().data_ptr()
        except Exception as e:  # noqa: BLE001 - the kind of refusal is what is compared
            return type(e)

    assert data_pointer(made) == data_pointer(official)

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_identity_layers_return_their_argument(backend):
    """``nn.Identity`` layers (plain, called by keyword, hooked, a subclass with its own forward) give
    eager's results in one graph: the plain ones return their argument itself, the others are traced."""
    class Doubling(torch.nn.Identity):
        def forward(self, x):
            return x * 2

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.d = torch.nn.Identity(), torch.nn.Identity(), torch.nn.Identity(), Doubling()
            self.c.register_forward_hook(lambda module, args, out: out + 1)

        def forward(self, x):
            y = self.a(x)
            return y is x, self.b(input=x) + 1, self.c(x), self.d(x)

    counting = CountingBackend(backend)
    run_differential(Net(), torch.randn(3), backend=counting)
    assert len(counting.graphs) == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dropout_out_of_training_returns_its_argument(backend, monkeypatch):
    """``nn.Dropout`` in eval mode returns its argument itself, with no node, as eager's ``F.dropout`` does;
    an invalid ``p`` still raises eager's ValueError, a patched ``F.dropout`` is still the one called, and
    a dropout that trains is still a node."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = torch.nn.Dropout(0.3)

        def forward(self, x):
            y = self.drop(x)
            return y is x, y + 1

    net = Net().eval()
    counting = CountingBackend(backend)
    run_differential(net, torch.randn(3), backend=counting)
    assert len(counting.graphs) == 1 and "dropout" not in counting.graphs[0].code

    net.drop.p = 1.5  # F.dropout raises on it
    run_differential(net, torch.randn(3), backend=CountingBackend(backend))

    net.drop.p = 0.3
    monkeypatch.setattr(torch.nn.functional, "dropout", lambda x, p, training, inplace: x * 0)
    run_differential(net, torch.randn(3), backend=CountingBackend(backend))

    monkeypatch.undo()
    net.train()
    counting = CountingBackend(backend)
    out = dynacap.optimize(net, backend=counting)(torch.ones(1000))
    assert out[0] is False and len(counting.graphs) == 1 and "dropout" in counting.graphs[0].code

