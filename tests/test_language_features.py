"""Python features inside captured code: generators, generator expressions, super(), layer subclasses."""
import inspect

import pytest
import torch
import torch.nn as nn

import dynacap

from differential import assert_fully_captured, run_differential


def t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        total = sum(h(x) for h in self.heads)
        stacked = torch.stack(tuple(h(x).relu() for h in self.heads))
        return total, stacked


HEADS = Heads().eval()


def heads(x):
    return HEADS(x)


def squares(n, x):
    for i in range(n):
        yield x * i


def consume_user_generator(x):
    return list(squares(3, x))


def genexpr_with_condition(x, ys):
    return [y * x for y in ys if y.shape == x.shape], any(y is x for y in ys)


def genexpr_with_break(x):
    return sum(print("item", i) or x * i for i in range(3))


@pytest.mark.parametrize("fn,make_args", [
    (heads, lambda: (t(2, 4),)),
    (consume_user_generator, lambda: (t(3),)),
    (genexpr_with_condition, lambda: (t(3), [t(3, seed=1), t(2, seed=2), t(3, seed=3)])),
], ids=["module_heads", "user_generator", "genexpr_condition"])
def test_generators_fully_captured(fn, make_args):
    args = make_args()
    run_differential(fn, *args)
    assert_fully_captured(fn, *make_args())


def test_break_inside_generator_matches_eager():
    run_differential(genexpr_with_break, t(3))


class ScaledLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


class KeepsForward(nn.Linear):
    pass


class Base(nn.Module):
    def forward(self, x):
        return x + 1


class Child(Base):
    def forward(self, x):
        return super().forward(x) * 3


class TwoArgSuper(Base):
    def forward(self, x):
        return super(TwoArgSuper, self).forward(x) - 1


@pytest.mark.parametrize("module", [ScaledLinear(3, 3), KeepsForward(3, 3), Child(), TwoArgSuper()],
                         ids=["super_forward_of_layer", "subclass_keeps_layer_forward", "super_user_base",
                              "two_argument_super"])
def test_super_and_layer_subclasses_fully_captured(module):
    x = t(2, 3)
    run_differential(lambda inp: module(inp), x)
    assert_fully_captured(module, t(2, 3))


class ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        ctx.save_for_backward(x)
        return x * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.k * 10, None


def uses_autograd_function(x):
    return ScaleGrad.apply(x.sin(), 3.0).sum()


def test_custom_autograd_function_in_graph_keeps_its_backward():
    x1 = t(4).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    expected = uses_autograd_function(x1)
    expected.backward()
    f = dynacap.optimize(uses_autograd_function, backend="eager")
    got = f(x2)
    got.backward()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x2.grad, x1.grad)
    assert_fully_captured(uses_autograd_function, t(4).requires_grad_())


class CheckedBatchNorm(nn.BatchNorm2d):
    def forward(self, x):
        self._check_input_dim(x)  # a built-in layer's helper, called from a user subclass
        return super().forward(x) + 1


def iter_next_and_inspect(x, fn, scales):
    it = iter(scales)
    first = next(it)
    rest = [next(it, None) for _ in range(3)]
    k = 2 if inspect.isfunction(fn) else 3
    return first * x * k, rest


@pytest.mark.parametrize("fn,make_args", [
    (CheckedBatchNorm(3).eval(), lambda: (t(2, 3, 4, 4),)),
    (iter_next_and_inspect, lambda: (t(2), len, [1.0, 2.0])),
    (iter_next_and_inspect, lambda: (t(2), iter_next_and_inspect, [3.0])),
], ids=["layer_helper_from_subclass", "iter_next_builtin_arg", "iter_next_function_arg"])
def test_more_features_fully_captured(fn, make_args):
    run_differential(fn, *make_args())
    assert_fully_captured(fn, *make_args())


LSTM = nn.LSTM(4, 5, batch_first=True).eval()


def lstm_nested_result(x):
    # Recurrent layers run eagerly while gradients are on (AOTAutograd cannot take their fused kernels).
    with torch.no_grad():
        out, (h, c) = LSTM(x)
    return out.relu(), h + c


def test_nested_tuple_results_fully_captured():
    run_differential(lstm_nested_result, t(2, 3, 4))
    assert_fully_captured(lstm_nested_result, t(2, 3, 4))


class StoresApply(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = ScaleGrad.apply  # a bound classmethod stored on the module

    def forward(self, x):
        return self.scale(x.cos(), 2.0) + 1


def test_stored_autograd_apply_fully_captured():
    module = StoresApply()
    run_differential(lambda x: module(x), t(3))
    assert_fully_captured(module, t(3))


class SlicedSequential(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    def forward(self, x):
        head = self.seq[:2]
        return self.seq[2:](head(x)), isinstance(head, nn.Sequential), len(head)


def test_sequential_slices_fully_captured():
    module = SlicedSequential()
    run_differential(lambda x: module(x), t(3, 4))
    assert_fully_captured(module, t(3, 4))


def autocast_block(x, w):
    y = x * 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = y @ w
        inner_dtype = z.dtype
    return z.float() + 1, inner_dtype, torch.is_autocast_enabled("cpu")


def autocast_block_with_break(x, w):
    y = x * 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = y @ w
        print("inside", torch.is_autocast_enabled("cpu"))
        z = z @ w
    return z.float() + 1, torch.is_autocast_enabled("cpu")


def test_autocast_block_fully_captured():
    run_differential(autocast_block, t(4, 4), t(4, 4, seed=1))
    assert_fully_captured(autocast_block, t(4, 4), t(4, 4, seed=1))


def test_break_inside_autocast_keeps_the_graph_before_and_leaves_autocast():
    run_differential(autocast_block_with_break, t(4, 4), t(4, 4, seed=1))
    out = dynacap.explain(autocast_block_with_break)(t(4, 4), t(4, 4, seed=1))
    assert (out.graph_count, out.graph_break_count) == (1, 1), str(out)
    assert not torch.is_autocast_enabled("cpu")
