"""Capture-speed shortcuts must never change an answer: each is checked against the slow path.

- the guard text next to a C program is generated when first read (``CompiledGuard.source``): it must
  be the text generated at capture, for the guards of that capture only;
- graph inputs read through a shared prefix load it once per call (``rewrite._load_inputs``): a
  prefix that changes between calls (a child module swapped for another instance of its class, a
  list item replaced) must be read anew;
- a tensor reached two ways is one placeholder (``GraphBuilder._input_of_tensor``), and placeholders
  stay in input order (``GraphBuilder._last_placeholder``);
- the ``GraphModule`` is generated once (``GraphBuilder.finish``): its code is its graph's;
- a fake result made again from recorded metadata (``Propagation.propagate``) and the result rules
  (``graph/results.py``: eval-mode batch norm, linear, layer norm, gelu, conv2d) must be what dispatching
  the operation gives (shape, strides, dtype, device, view of a new base, memory format), across shapes,
  dtypes and layouts, and results that share an argument's storage or need grad are never made again
  from that metadata;
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


@pytest.mark.parametrize("shape", [(1, 8, 5, 5), (2, 3), (1, 16, 1, 1), (4, 8, 5), (3, 2, 1, 4, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_result_rule_is_the_dispatched_result(shape, dtype, affine):
    from dynacap.graph import GraphBuilder
    from dynacap.graph.results import _batch_norm_result

    builder = GraphBuilder()
    with builder.propagating(), torch.no_grad():
        x = builder.fake_of(torch.randn(shape, dtype=dtype))
        stats = [builder.fake_of(torch.randn(shape[1], dtype=dtype)) for _ in range(4)]
        weight, bias = (stats[2], stats[3]) if affine else (None, None)
        real = F.batch_norm(x, stats[0], stats[1], weight, bias, False, 0.1, 1e-5)
        rule = _batch_norm_result([x, stats[0], stats[1], weight], {"bias": bias})
        assert rule == (real.shape, real.stride(), real.dtype, real.device, None)
        made = builder._propagation._remake(*rule)
        assert _metadata(made) == _metadata(real)
        # Anything else is dispatched: training, a non-contiguous input, statistics of another dtype.
        assert _batch_norm_result([x, stats[0], stats[1]], {"training": True}) is None
        assert _batch_norm_result([x.transpose(0, 1), stats[0], stats[1]], {}) is None or shape[0] == shape[1] == 1
        other = builder.fake_of(torch.randn(shape[1], dtype=torch.float64))
        assert _batch_norm_result([x, other, stats[1]], {}) is None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_repeated_blocks_with_batch_norm(backend):
    net = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                                    torch.nn.ReLU(inplace=True)) for _ in range(3)],
                              torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3)).eval()
    with torch.no_grad():
        run_differential(net, torch.randn(2, 4, 6, 6), backend=CountingBackend(backend))


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


def _rule_cases():
    """(function, argument makers, kwargs): inputs of several shapes (size-1 dims, many dims), dtypes and
    layouts (transposed, channels_last, sliced, views of a result), with and without parameters."""
    def t(*shape, dtype=torch.float32):
        return lambda: torch.randn(shape, dtype=dtype)

    def strided(make, fn):
        return lambda: fn(make())

    cases = []
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for shape in [(3, 4), (1, 4), (2, 5, 4), (1, 1, 4), (2, 3, 5, 4), (1, 7, 7, 4), (2, 1, 3, 1, 4)]:
            x = t(*shape, dtype=dtype)
            cases += [(F.linear, [x, t(6, 4, dtype=dtype), t(6, dtype=dtype)], {}),
                      (F.linear, [x, t(6, 4, dtype=dtype)], {}),
                      (F.linear, [x, t(1, 4, dtype=dtype), t(1, dtype=dtype)], {}),
                      (F.layer_norm, [x, (4,), t(4, dtype=dtype), t(4, dtype=dtype)], {}),
                      (F.layer_norm, [x, [4]], {"eps": 1e-6}),
                      (F.layer_norm, [x, (shape[-2], 4), t(shape[-2], 4, dtype=dtype)], {}),
                      (F.gelu, [x], {}),
                      (F.gelu, [x], {"approximate": "tanh"})]
    # Layouts the rules leave to dispatching (they must say None, or the same as dispatching).
    nchw = t(2, 4, 3, 5)
    odd = [strided(nchw, lambda x: x.permute(0, 2, 3, 1)),               # a channels-last view
           strided(nchw, lambda x: x.contiguous(memory_format=torch.channels_last).permute(0, 2, 3, 1)),
           strided(nchw, lambda x: x.contiguous(memory_format=torch.channels_last)[..., :4]),
           strided(t(3, 8), lambda x: x[:, ::2]),                        # a strided slice
           strided(t(4, 3), lambda x: x.t()),
           strided(t(1, 6, 4), lambda x: x[:, 1:5]),                       # an offset
           strided(t(1, 4, 4), lambda x: x[:, :1]),                        # contiguous, odd strides of size 1
           strided(t(2, 3, 4), lambda x: x.transpose(0, 1)),
           strided(t(2, 5, 4), lambda x: x[:, 0]),                         # a row of each sequence (a class token)
           t(0, 4), t(2, 0, 4),                                          # empty
           strided(t(5, 1, 4), lambda x: x.expand(5, 3, 4)),
           lambda: torch.randint(0, 5, (3, 4))]
    for x in odd:
        cases += [(F.linear, [x, t(6, 4), t(6)], {}), (F.linear, [x, t(6, 4)], {}),
                  (F.layer_norm, [x, (4,), t(4), t(4)], {}), (F.gelu, [x], {})]
    # Parameters the rules leave to dispatching: another dtype, transposed, broadcast bias.
    cases += [(F.linear, [t(2, 3, 4), t(6, 4, dtype=torch.float64)], {}),
              (F.linear, [t(2, 3, 4), strided(t(4, 6), lambda w: w.t()), t(6)], {}),
              (F.linear, [t(2, 3, 4), t(6, 4), t(1)], {}),
              (F.layer_norm, [t(2, 3, 4), (4,), strided(t(8), lambda w: w[::2])], {}),
              (F.layer_norm, [t(2, 3, 4), (4,), None, t(4, dtype=torch.float64)], {})]
    # Convolutions: strides, padding, dilation, groups (depthwise), 1x1, size-1 dims, channels_last operands.
    cl = lambda make: strided(make, lambda x: x.contiguous(memory_format=torch.channels_last))  # noqa: E731
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        for xs, ws, kw in [((1, 3, 16, 16), (8, 3, 7, 7), {"stride": 2, "padding": 3}),
                           ((1, 8, 9, 9), (8, 1, 7, 7), {"padding": 3, "groups": 8}),
                           ((2, 4, 1, 1), (8, 4, 1, 1), {}), ((1, 1, 5, 5), (2, 1, 3, 3), {}),
                           ((2, 4, 5, 5), (8, 4, 1, 1), {"stride": (2, 1)}),
                           ((1, 4, 8, 8), (4, 2, 3, 3), {"groups": 2, "dilation": 2, "padding": (2, 1)}),
                           ((1, 4, 8, 8), (6, 4, 2, 2), {"stride": 2}), ((1, 4, 3, 3), (6, 4, 3, 3), {}),
                           ((1, 4, 2, 2), (6, 4, 3, 3), {}),  # no output: raises
                           ((1, 4, 5, 5), (6, 4, 3, 3), {"padding": "same"}),
                           ((2, 4, 5, 5), (1, 4, 3, 3), {}), ((1, 1, 4, 4), (1, 1, 1, 1), {})]:
            x, w, b = t(*xs, dtype=dtype), t(*ws, dtype=dtype), t(ws[0], dtype=dtype)
            nhwc = strided(t(xs[0], xs[2], xs[3], xs[1], dtype=dtype), lambda v: v.permute(0, 3, 1, 2))
            cases += [(F.conv2d, [x, w, b], kw), (F.conv2d, [x, w], kw), (F.conv2d, [cl(x), w, b], kw),
                      (F.conv2d, [x, cl(w), b], kw), (F.conv2d, [strided(x, lambda v: v.transpose(2, 3)), w], kw),
                      (F.conv2d, [nhwc, w, b], kw), (F.conv2d, [nhwc, cl(w)], kw)]
    cases += [(F.conv2d, [t(1, 4, 5, 5), t(6, 4, 3, 3, dtype=torch.float64)], {}),
              (F.conv2d, [t(1, 4, 5, 5), t(6, 3, 3, 3)], {}), (F.conv2d, [t(4, 5, 5), t(6, 4, 3, 3)], {})]
    return cases


_RULE_CASES = _rule_cases()


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", range(len(_RULE_CASES)))
def test_result_rules_are_the_dispatched_result(case, grad):
    """Each result rule answers exactly what dispatching gives (shape, strides, dtype, device, view of a
    new base or not, memory format), or None; a result that would need grad is always dispatched."""
    from dynacap.graph import GraphBuilder
    from dynacap.graph.propagation import _fresh
    from dynacap.graph.results import RESULT_RULES

    fn, makers, kwargs = _RULE_CASES[case]
    torch.manual_seed(case)
    builder = GraphBuilder()
    with builder.propagating(), torch.set_grad_enabled(grad):
        reals = [m() if callable(m) else m for m in makers]
        if grad:  # parameters that need grad (the input's fake stays a view where it is one)
            reals[1:] = [r.detach().requires_grad_() if isinstance(r, torch.Tensor) and r.is_floating_point()
                         else r for r in reals[1:]]
        args = [builder.fake_of(r) if isinstance(r, torch.Tensor) else r for r in reals]
        rule = RESULT_RULES[fn](args, kwargs)
        try:
            real = fn(*args, **kwargs)
        except Exception:
            assert rule is None
            return
        if rule is None:
            return
        assert not real.requires_grad
        assert rule == _fresh(real, [a for a in args if isinstance(a, torch.Tensor)])
        made = builder._propagation._remake(*rule)
        assert _metadata(made) == _metadata(real)
        assert made.untyped_storage().nbytes() == real.untyped_storage().nbytes()
        formats = {4: [torch.channels_last], 5: [torch.channels_last_3d]}.get(made.dim(), [])
        for fmt in (torch.contiguous_format, *formats):
            assert made.is_contiguous(memory_format=fmt) == real.is_contiguous(memory_format=fmt)
        if made._is_view():
            assert _metadata(made._base) == _metadata(real._base)



@pytest.mark.parametrize("grad", [False, True])
def test_cat_result_rule_is_the_dispatched_result(grad):
    """``torch.cat`` (a class token before a transposed sequence, along any dim, three inputs) is answered as
    dispatching answers; other dtypes, ranks or sizes are declined or raise."""
    from dynacap.graph import GraphBuilder
    from dynacap.graph.propagation import _fresh
    from dynacap.graph.results import RESULT_RULES

    cases = [([(1, 1, 4), (1, 3, 4)], 1), ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 5)], -1), ([(2, 3)] * 3, 1),
             ([(5,), (2,)], 0), ([(2, 3), (2, 4)], 0), ([(2, 3), (2, 3, 1)], 0), ([(2, 3), (2, 3)], 2),
             ([(1, 3, 2, 2), (1, 3, 2, 2)], 1), ([(2, 1, 3), (2, 4, 3)], 1)]
    builder = GraphBuilder()
    with builder.propagating(), torch.set_grad_enabled(grad):
        for shapes, dim in cases:
            for variant in ("plain", "transposed", "float64", "needs_grad"):
                reals = [torch.randn(s) for s in shapes]
                if variant == "transposed" and reals[-1].dim() >= 2:  # a sequence made by a transpose
                    reals[-1] = torch.randn(tuple(reversed(shapes[-1]))).permute(*reversed(range(len(shapes[-1]))))
                if variant == "float64":
                    reals[-1] = reals[-1].double()
                if variant == "needs_grad":
                    reals[0].requires_grad_()
                fakes = [builder.fake_of(r) for r in reals]
                rule = RESULT_RULES[torch.cat]([fakes, dim], {})
                try:
                    real = torch.cat(fakes, dim)
                except Exception:
                    assert rule is None
                    continue
                if rule is not None:
                    assert not real.requires_grad
                    assert rule == _fresh(real, fakes), (shapes, dim, variant)
        fakes = [builder.fake_of(torch.randn(1, 1, 4)), builder.fake_of(torch.randn(1, 3, 4))]
        if not grad:
            assert RESULT_RULES[torch.cat]([fakes], {"dim": 1}) is not None  # it answers the common case

def test_result_rules_answer_the_common_cases():
    """The rules do answer for what a transformer block and a ConvNeXt block run (else they buy nothing)."""
    from dynacap.graph import GraphBuilder
    from dynacap.graph.results import RESULT_RULES

    builder = GraphBuilder()
    with builder.propagating(), torch.no_grad():
        x = builder.fake_of(torch.randn(1, 7, 7, 8))
        w, b = builder.fake_of(torch.randn(16, 8)), builder.fake_of(torch.randn(16))
        ln = builder.fake_of(torch.randn(8))
        assert RESULT_RULES[F.layer_norm]([x, (8,), ln, ln], {}) is not None
        assert RESULT_RULES[F.linear]([x, w, b], {}) is not None
        assert RESULT_RULES[F.gelu]([F.linear(x, w, b)], {}) is not None
        image = builder.fake_of(torch.randn(1, 3, 32, 32))
        stem, dw = builder.fake_of(torch.randn(8, 3, 4, 4)), builder.fake_of(torch.randn(8, 1, 7, 7))
        assert RESULT_RULES[F.conv2d]([image, stem, None, 4], {}) is not None
        assert RESULT_RULES[F.conv2d]([F.conv2d(image, stem, None, 4), dw], {"padding": 3, "groups": 8}) is not None



def _random_operand(rng, shape, dtype):
    """A real tensor of ``shape`` in one of many layouts: contiguous, permuted, channels-last, sliced
    with a step, expanded (stride 0), or a size-1 dim with an odd stride."""
    import random as _random

    kind = rng.choice(["contiguous", "permuted", "channels_last", "sliced", "expanded", "odd"])
    if kind == "permuted" and len(shape) > 1:
        order = list(range(len(shape)))
        rng.shuffle(order)
        base = torch.randn([shape[d] for d in order], dtype=dtype)
        return base.permute([order.index(d) for d in range(len(shape))])
    if kind == "channels_last" and len(shape) == 4:
        return torch.randn(shape, dtype=dtype).contiguous(memory_format=torch.channels_last)
    if kind == "sliced" and shape:
        d = rng.randrange(len(shape))
        wider = list(shape)
        wider[d] *= 2
        return torch.randn(wider, dtype=dtype).narrow(d, 0, 2 * shape[d]).unfold(d, 1, 2).squeeze(-1)
    if kind == "expanded" and 1 in shape:
        d = shape.index(1)
        return torch.randn(shape, dtype=dtype).expand(*shape[:d], rng.choice([1, 3]), *shape[d + 1:])
    if kind == "odd" and 1 in shape:
        d = shape.index(1)
        big = list(shape)
        big[d] = 3
        return torch.randn(big, dtype=dtype).narrow(d, 1, 1)
    del _random
    return torch.randn(shape, dtype=dtype)


def _broadcast_partner(rng, shape):
    """Sizes that broadcast with ``shape``: fewer dims, size-1 dims, or ``shape`` itself."""
    dims = len(shape) - rng.randrange(len(shape) + 1)
    return [1 if rng.random() < 0.4 else n for n in shape[len(shape) - dims:]]


@pytest.mark.parametrize("seed", range(12))
def test_elementwise_result_rule_is_the_dispatched_layout(seed):
    """``a + b``, ``a * b``, ``a - b`` on random sizes and layouts (permuted, channels-last, strided,
    expanded, size-1 dims with odd strides, broadcasting both ways, scalars): the rule's strides are
    those fake dispatch gives, or the rule declines."""
    import operator
    import random

    from dynacap.graph import GraphBuilder
    from dynacap.graph.propagation import _fresh
    from dynacap.graph.results import RESULT_RULES

    rng = random.Random(seed)
    answered = 0
    builder = GraphBuilder()
    with builder.propagating(), torch.no_grad():
        for _ in range(150):
            dtype = rng.choice([torch.float32, torch.float64, torch.float16])
            shape = [rng.choice([1, 1, 2, 3, 4]) for _ in range(rng.randrange(1, 5))]
            a = _random_operand(rng, shape, dtype)
            pick = rng.random()
            if pick < 0.15:
                b = rng.choice([2, 0.5, True, -3])
            else:
                other = _broadcast_partner(rng, shape) if pick < 0.8 else shape
                b = _random_operand(rng, other, rng.choice([dtype, dtype, dtype, torch.float32]))
            if rng.random() < 0.3 and isinstance(b, torch.Tensor):
                a, b = b, a  # the broadcast operand first
            if not isinstance(a, torch.Tensor):
                continue
            op = rng.choice([operator.add, operator.mul, operator.sub, "add", "mul", torch.sub])
            args = [builder.fake_of(t) if isinstance(t, torch.Tensor) else t for t in (a, b)]
            rule = RESULT_RULES[op](args, {})
            try:
                real = getattr(args[0], op)(args[1]) if isinstance(op, str) else op(*args)
            except RuntimeError:
                assert rule is None
                continue
            if rule is None:
                continue
            answered += 1
            assert rule == _fresh(real, [t for t in args if isinstance(t, torch.Tensor)]), (op, a.shape, a.stride(),
                                                                                           getattr(b, "shape", b))
    assert answered > 40  # it answers for most of them, or it buys nothing



@pytest.mark.parametrize("seed", range(6))
def test_in_place_rule_is_what_dispatching_returns(seed):
    """``F.relu(x, inplace=True)``, ``x += y``, ``x.mul_(y)``... on random layouts (expanded: internal
    overlap; views of ``x`` as ``y``: partial overlap; broadcasting ``x`` itself; other dtypes; numbers;
    tensors that need grad; inference tensors): where the rule says the kernel returns ``x`` one version
    up, dispatching does exactly that, and where dispatching raises the rule said no."""
    import operator
    import random

    from dynacap.graph import GraphBuilder
    from dynacap.graph.results import RETURNS_FIRST_ARGUMENT

    rng = random.Random(seed)
    answered = 0
    for _ in range(120):
        grad = rng.random() < 0.3
        builder = GraphBuilder()
        with builder.propagating(), torch.set_grad_enabled(grad):
            shape = [rng.choice([1, 2, 3]) for _ in range(rng.randrange(0, 4))]
            dtype = rng.choice([torch.float32, torch.float16, torch.int64])
            with torch.inference_mode(rng.random() < 0.1):
                x = _random_operand(rng, shape, torch.float32).to(dtype) if shape else torch.randn(()).to(dtype)
            if rng.random() < 0.2 and x.is_floating_point() and not x.is_inference():
                x.requires_grad_()
            pick = rng.random()
            if pick < 0.2:
                y = rng.choice([2, 0.5, True, 2 ** 70])
            elif pick < 0.3:
                y = x
            elif pick < 0.4 and x.dim():
                y = x.detach()[..., :1] if not x.is_inference() else x
            else:
                y = _random_operand(rng, _broadcast_partner(rng, shape) if shape and pick < 0.8 else shape,
                                    torch.float32).to(rng.choice([dtype, dtype, torch.float64]))
            fx_ = builder.fake_of(x)
            fy = builder.fake_of(y) if isinstance(y, torch.Tensor) and y is not x else (fx_ if y is x else y)
            op, args, kwargs = rng.choice([
                (torch.nn.functional.relu, [fx_], {"inplace": True}),
                (torch.nn.functional.relu, [fx_, True], {}),
                (torch.nn.functional.relu, [fx_], {}),
                ("relu_", [fx_], {}), (torch.relu_, [fx_], {}),
                (operator.iadd, [fx_, fy], {}), (operator.imul, [fx_, fy], {}), (operator.isub, [fx_, fy], {}),
                ("add_", [fx_, fy], {}), ("mul_", [fx_, fy], {}), ("sub_", [fx_, fy], {}),
            ])
            says = RETURNS_FIRST_ARGUMENT[op](args, kwargs)
            before = None if fx_.is_inference() else fx_._version
            try:
                out = getattr(args[0], op)(*args[1:], **kwargs) if isinstance(op, str) else op(*args, **kwargs)
            except Exception:
                assert not says
                continue
            if says:
                answered += 1
                assert out is fx_ and fx_._version == before + 1
    assert answered > 15


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

def test_elementwise_result_rule_answers_convnext_layer_scale_and_residual():
    """The layouts a ConvNeXt block meets: a channels-last activation times a (1, C, 1, 1) scale, plus the
    channels-last shortcut; a transformer's residual add of contiguous tensors."""
    import operator

    from dynacap.graph import GraphBuilder
    from dynacap.graph.results import RESULT_RULES

    builder = GraphBuilder()
    with builder.propagating(), torch.no_grad():
        x = builder.fake_of(torch.randn(1, 8, 5, 5).contiguous(memory_format=torch.channels_last))
        gamma = builder.fake_of(torch.randn(1, 8, 1, 1))
        assert RESULT_RULES["mul"]([x, gamma], {})[1] == x.stride()
        assert RESULT_RULES[operator.add]([x, x], {})[1] == x.stride()
        t = builder.fake_of(torch.randn(1, 7, 16))
        assert RESULT_RULES[operator.add]([t, t], {})[1] == t.stride()
        assert RESULT_RULES[operator.mul]([t, 2 ** 70], {}) is None  # eager raises: it does not fit an int64

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_transformer_and_convnext_blocks_with_result_rules(backend):
    class Block(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.conv = torch.nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
            self.norm = torch.nn.LayerNorm(dim)
            self.fc1, self.fc2 = torch.nn.Linear(dim, 2 * dim), torch.nn.Linear(2 * dim, dim)

        def forward(self, x):
            y = self.conv(x).permute(0, 2, 3, 1)
            y = self.fc2(F.gelu(self.fc1(self.norm(y))))
            y = y.permute(0, 3, 1, 2)
            z = x.flatten(2).transpose(1, 2)
            z = z + self.fc2(F.gelu(self.fc1(self.norm(z)), approximate="tanh"))
            return x + y, z.sum(1)

    net = Block(4).eval()
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            run_differential(net, torch.randn(2, 4, 5, 5), backend=CountingBackend(backend))


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

