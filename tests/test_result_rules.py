"""Result rules and layouts: fake results answered from metadata must be what dispatching gives.

``graph/results.py`` answers eval-mode batch norm, linear, layer norm, gelu, conv2d, ``torch.cat`` and
``a + b``/``a * b``/``a - b`` (``graph/layouts.py``) from their arguments' metadata, and knows which in-place
kernels return their argument; each is checked here against fake dispatch of the operation across
shapes, dtypes and layouts (random ones for the elementwise and in-place rules), with and without
gradients: the same shape, strides, dtype, device, view of a new base, memory format, or a decline.
"""
from __future__ import annotations

import pytest
import torch

from differential import CountingBackend, run_differential
from test_capture_speed import _metadata

F = torch.nn.functional


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
    # addmm (GPT-2's Conv1D): biases of one or two dims, operands of any strides, other dtypes, wrong sizes.
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for bias in [(6,), (1, 6), (3, 6), (1,), (3, 1)]:
            cases += [(torch.addmm, [t(*bias, dtype=dtype), t(3, 4, dtype=dtype), t(4, 6, dtype=dtype)], {}),
                      (torch.addmm, [t(*bias, dtype=dtype), strided(t(4, 3, dtype=dtype), lambda m: m.t()),
                                     strided(t(6, 4, dtype=dtype), lambda m: m.t())], {}),
                      (torch.addmm, [t(*bias, dtype=dtype), strided(t(2, 3, 4, dtype=dtype), lambda m: m[0]),
                                     strided(t(4, 12, dtype=dtype), lambda m: m[:, ::2])], {})]
    cases += [(torch.addmm, [t(6), t(3, 4), t(5, 6)], {}), (torch.addmm, [t(7), t(3, 4), t(4, 6)], {}),
              (torch.addmm, [t(6), t(3, 4), t(4, 6, dtype=torch.float64)], {}),
              (torch.addmm, [t(6), t(3, 4), t(4, 6)], {"beta": 0.5}), (torch.addmm, [t(6), t(2, 3, 4), t(4, 6)], {})]
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



@pytest.mark.parametrize("seed", range(4))
def test_to_dtype_rule_is_the_dispatched_result(seed):
    """``x.to(dtype)`` on random layouts (permuted, sliced with a step, expanded, size-1 dims with odd
    strides) and dtype pairs: the rule's result is dispatching's, or it declines."""
    import random

    from dynacap.graph import GraphBuilder
    from dynacap.graph.propagation import _fresh
    from dynacap.graph.results import RESULT_RULES

    rng = random.Random(seed)
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
              torch.bool, torch.complex64]
    answered = 0
    builder = GraphBuilder()
    with builder.propagating(), torch.no_grad():
        for _ in range(120):
            shape = [rng.choice([1, 1, 2, 3]) for _ in range(rng.randrange(0, 4))]
            x = builder.fake_of(_random_operand(rng, shape, torch.float32).to(rng.choice(dtypes[:-1])))
            dtype = rng.choice(dtypes)
            args, kwargs = ([x, dtype], {}) if rng.random() < 0.5 else ([x], {"dtype": dtype})
            rule = RESULT_RULES["to"](args, kwargs)
            real = x.to(*args[1:], **kwargs)
            if rule is not None:
                answered += 1
                assert rule == _fresh(real, [x]), (x.shape, x.stride(), x.dtype, dtype)
    assert answered > 30

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
