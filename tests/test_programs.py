"""Differential programs: each runs eagerly and under dynacap, and every observable must match.

``FULL`` programs are inside the foundation's interpreter scope: besides the
differential check they must be captured as exactly one graph with no graph
break (checked with ``dynacap.explain``).  ``PARTIAL`` programs contain
something that is not captured (printing, data-dependent branches,
``.item()``, unknown C functions, exceptions, ``with``...): for those only
the eager-equivalence is asserted, since graph and break counts of frames
with breaks are expected to change.
"""
from __future__ import annotations

import json
import math
import operator
import warnings
import zlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynacap
from differential import CountingBackend, assert_fully_captured, run_differential


def t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape) * 7 + len(shape))
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g, dtype=dtype)
    return torch.randint(-8, 8, shape, generator=g, dtype=dtype)


# ---------------------------------------------------------------------------------------------------
# Globals and helpers the programs read.
SCALE = 3.0
OFFSET = torch.tensor([0.5, -1.0, 2.0])
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}


def helper_affine(x, weight=2.0, *, bias=0.5):
    return x * weight + bias


def helper_deep(x, n):
    if n == 0:
        return x.sin()
    return helper_deep(x + n, n - 1) * 0.5


def helper_varargs(*tensors, **options):
    total = tensors[0]
    for extra in tensors[1:]:
        total = total + extra
    if options.get("square", False):
        total = total * total
    return total * options.get("scale", 1.0)


def make_scaler(k, shift):
    def scale(x):
        return x * k + shift
    return scale


def make_counter_closure(base):
    def accumulate(x):
        return x + base
    return accumulate


class Config:
    """A plain Python object with attributes, a property and methods."""

    def __init__(self, alpha=0.25, depth=2):
        self.alpha = alpha
        self.depth = depth
        self.name = "cfg"

    @property
    def double_alpha(self):
        return self.alpha * 2

    def apply(self, x):
        for _ in range(self.depth):
            x = self.step(x)
        return x

    def step(self, x):
        return x * self.alpha + self.double_alpha


class Holder:
    def __init__(self):
        self.value = None
        self.count = 0


# ---------------------------------------------------------------------------------------------------
# Modules.
class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.register_buffer("shift", torch.linspace(-1, 1, dim))
        self.gain = nn.Parameter(torch.full((dim,), 1.5))

    @property
    def scale(self):
        return self.gain * 0.5

    def project(self, x):
        return self.lin(x) + self.shift

    def forward(self, x):
        return self.norm(self.project(x)) * self.scale + x


class Tower(nn.Module):
    def __init__(self, dim=6, depth=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.head = nn.Sequential(nn.Linear(dim, 4), nn.ReLU(), nn.Linear(4, 2))
        self.temperature = 2.0

    def features(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x) if i % 2 == 0 else block.project(x)
        return x

    def forward(self, x):
        return self.head(self.features(x)) / self.temperature


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.pool(x).flatten(1)
        return self.fc(self.drop(x))


class EmbedMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 5)
        self.proj = nn.Linear(5, 5, bias=False)

    def forward(self, idx, mask=None):
        h = self.emb(idx)
        if mask is not None:
            h = h * mask.unsqueeze(-1)
        return self.proj(h).mean(dim=1)


class Gated(nn.Module):
    """A user module inside a user module inside a Sequential."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(Block(4), nn.GELU(), Block(4))
        self.gate = nn.Linear(4, 4)

    def forward(self, x):
        return self.inner(x) * torch.sigmoid(self.gate(x))


TOWER = Tower().eval()
CONVNET = ConvNet().eval()
EMBED = EmbedMean()
GATED = Gated()
MLP = nn.ModuleList([nn.Linear(5, 5) for _ in range(3)])


# ---------------------------------------------------------------------------------------------------
# Fully capturable programs.
def locals_and_constants(x):
    a = x * 2
    b = a + 3.5
    c = b - x
    d = c / 4
    e = -d
    return e + 1e-3


def globals_and_helpers(x):
    y = helper_affine(x, SCALE, bias=-1.0) + OFFSET
    return ACTIVATIONS["tanh"](y) * SCALE


def attribute_loads(x):
    return torch.nn.functional.relu(x) * math.pi + torch.float32.is_floating_point + F.silu(x)


def closure_made_inside(x, y):
    k = 3

    def inner(v):
        return v * k + y

    return inner(x) + inner(x * 2)


def nested_closures_with_nonlocal(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v

    add(x)
    add(2.5)
    add(x.cos())
    return total


def lambdas_and_higher_order(x):
    ops = [lambda v: v + 1, lambda v: v * 2, torch.sin]
    for op in ops:
        x = op(x)
    apply_twice = lambda f, v: f(f(v))  # noqa: E731
    return apply_twice(torch.cos, x)


def unary_ops(x, mask):
    return -x, +x, ~mask, abs(x), x.neg().abs(), not False


def binary_ops_float(x, y):
    return x + y, x - y, x * y, x / y, x ** 2, 2 ** x, x @ y.T, x % 1.5, x // 0.7, 1 - x, 3 / y


def binary_ops_int(a, b):
    return a & b, a | b, a ^ b, a << 1, b >> 1, a // 3, a % 5, -a, a * b


def inplace_ops_on_locals(x, y):
    z = x.clone()
    z += y
    z *= 2
    z -= x
    z /= 3
    w = y.clone()
    w.add_(1).mul_(z)
    return z, w


def comparisons_tensors(x, y):
    return x < y, x <= 0.1, x == y, x != y, x > y, x >= 0.0, (x > 0) & (y < 0)


def python_number_arithmetic(x, n):
    a = n * 3 + 2
    b = a // 4
    c = a % 5
    d = 2 ** n
    f = n / 3
    g = divmod(a, 7)
    h = -n if n > 2 else n
    return x * (a + b + c + d + f + g[0] + g[1] + h), a, f


def chained_comparisons(x, n):
    if 0 < n < 10 and n != 3:
        x = x + n
    if n in (1, 2, 5) or n is None:
        x = x * 2
    if not (n >= 4):
        x = x - 1
    return x


def calls_with_keywords(x):
    s = torch.sum(x, dim=1, keepdim=True)
    m = x.mean(dim=0)
    c = torch.clamp(x, min=-0.5, max=0.5)
    return helper_affine(s, bias=m.sum()), helper_affine(c, weight=-1.0), helper_affine(x, 0.5, bias=1.0)


def star_args_and_kwargs(x, y, z):
    tensors = (x, y)
    options = {"scale": 0.5, "square": True}
    a = helper_varargs(*tensors, z, **options)
    b = helper_varargs(x, *[y, z])
    extra = dict(scale=2.0)
    c = helper_varargs(*tensors, **extra)
    return a, b, c, torch.stack([*tensors, z])


def tuple_list_dict_building(x, y):
    pair = (x, y)
    items = [x + 1, y - 1]
    items.append(x * y)
    items.extend([pair[0], pair[1]])
    table = {"sum": x + y, "diff": x - y}
    table["prod"] = x * y
    table.update(ratio=x / 2)
    out = {k: v * 2 for k, v in table.items()}
    return items[1:4], out, tuple(items), len(table), list(table.keys())


def unpacking(x, y):
    a, b = x.chunk(2)
    (c, d), e = (y, x), y.sum()
    first, *middle, last = [a, b, c, d, e]
    *init, tail = (1, 2, 3)
    head, *rest = x.shape
    return first + last, len(middle), sum(init) * tail, middle[1] * 2, head, rest


def slicing_and_indexing(x, lst):
    i = 1
    return (x[0], x[1:], x[:, ::2], x[..., -1], x[None, :, 1], x[:, [0, 2]], x[i:i + 2, slice(1, None)],
            lst[1:3], lst[::-1], lst[-1], x[1, 2], x[torch.tensor([2, 0])])


def tensor_setitem(x):
    y = x.clone()
    y[0] = 0.0
    y[:, 1] = x[:, 0] * 2
    y[y > 1] = 1.0
    y[1:, -1] += 5
    return y


def if_on_constant(x, flag, mode):
    if flag:
        x = x + 1
    else:
        x = x - 1
    if mode == "double":
        x = x * 2
    elif mode == "square":
        x = x * x
    return x


def while_on_constant(x, n):
    i = 0
    while i < n:
        x = x * 1.5 + i
        i += 1
    while True:
        if n <= 0:
            break
        n -= 2
        x = x - 0.5
    return x


def for_over_range_and_sequences(x, ts):
    for i in range(3):
        x = x + i
    for i in range(4, 0, -2):
        x = x * i
    for w in (0.5, 0.25):
        x = x * w
    for t_ in ts:
        x = x + t_
    for i, t_ in enumerate(ts, start=1):
        x = x - i * t_
    for a, b in zip(ts, ts[1:]):
        x = x + a * b
    for t_ in reversed(ts):
        x = x / (t_.abs() + 1)
    return x


def loop_control(x, n):
    for i in range(n):
        if i == 1:
            continue
        if i == 4:
            break
        x = x + i
    else:
        x = x * 100
    return x


def tensor_attributes(x):
    n, c = x.shape
    d = x.dim() + x.ndim
    same = x.dtype == torch.float32
    sz = x.size()
    return (x.T, x.view(c, n), x.view(-1), x.to(torch.float64), x.to(dtype=torch.int32), x.size(1), d,
            same, sz, x.shape[-1], x.numel(), x.reshape(*x.shape[::-1]), x.t().contiguous(),
            x.is_floating_point(), x.device, x.dtype, x.requires_grad)


def tensor_methods(x, y):
    values, indices = x.max(dim=1)
    top_values, top_indices = x.topk(2, dim=-1)
    return (x.sum(dim=0).mean(), x.permute(1, 0), x.transpose(0, 1).flatten(), x.unsqueeze(0).squeeze(),
            x.float(), x.long(), x.type_as(y), x.softmax(-1), values, indices, top_indices, x.exp().log1p(),
            x.masked_fill(x < 0, 0.0), x.new_zeros(2), x.expand(2, *x.shape).sum(0), x.split(1, dim=1)[0])


def shape_arithmetic(x):
    b, *rest = x.shape
    flat = math.prod(rest)
    y = x.reshape(b, flat)
    z = y.new_ones(tuple(x.shape[:1]) + (2,))
    return y, z, torch.Size([b, flat]), x.shape + (1,), x.shape == torch.Size([2, 3, 4])


def user_module_tower(x):
    return TOWER(x)


def conv_net(x):
    return CONVNET(x) * 2


def embedding_with_optional_mask(idx, mask):
    return EMBED(idx, mask), EMBED(idx)


def module_list_mlp(x):
    for layer in MLP:
        x = torch.relu(layer(x))
    return MLP[-1](x) + MLP[0].bias


def nested_user_modules(x):
    return GATED(x)


def recursion_inlined(x):
    return helper_deep(x, 5)


def pure_builtins(x, sizes, names):
    total = sum(sizes)
    biggest = max(sizes)
    smallest = min(*sizes, 10)
    count = len(names)
    longest = max(names, key=len) if False else sorted(names)[0]
    ok = isinstance(x, torch.Tensor) and isinstance(sizes, (list, tuple)) and not isinstance(count, str)
    ranges = list(range(1, total, 3))
    pairs = dict(zip(names, sizes))
    flags = any([s > 2 for s in sizes]), all([s > 0 for s in sizes])
    return (x * total + biggest - smallest + abs(-count), ok, ranges, pairs, longest, flags,
            round(2.567, 2), int("7") + float("1.5"), str(count), bool(sizes), list(enumerate(names)))


def functional_calls(x, w):
    return (F.relu(x), F.gelu(x), F.softmax(x, dim=-1), F.log_softmax(x, -1), F.linear(x, w),
            F.pad(x, (1, 1)), F.normalize(x, dim=1), F.dropout(x, p=0.3, training=False),
            F.layer_norm(x, x.shape[-1:]), F.mse_loss(x, x.flip(0)), F.leaky_relu(x, 0.2),
            F.one_hot(torch.arange(3), 4))


def factory_functions(x, n):
    return (torch.zeros(3, 4), torch.ones_like(x), torch.arange(n), torch.arange(0, 1, 0.25),
            torch.full((2, 2), 7.0), torch.eye(n), torch.linspace(0, 1, 5), torch.zeros_like(x, dtype=torch.int64),
            torch.tensor([1.0, 2.0]) * x.sum(), torch.empty(2, 3).fill_(1.0), x + torch.ones(x.shape))


def torch_ops(x, y):
    return (torch.where(x > 0, x, y), torch.cat([x, y], dim=0), torch.stack((x, y), 1), torch.einsum("ij,kj->ik", x, y),
            torch.matmul(x, y.T), torch.maximum(x, y), torch.cumsum(x, 0), torch.nn.functional.cosine_similarity(x, y),
            torch.flip(x, [0]), torch.roll(x, 1, 0), *torch.chunk(y, 3, dim=1))


def mutate_input_tensors(x, y):
    x.add_(1)
    y[0] = -5.0
    y.mul_(x[:1])
    x.clamp_(max=1.5)
    return (x * y).sum()


def mutate_input_and_return_it(x):
    x.sub_(0.5).abs_()
    return x


def return_input_unchanged(x, y):
    return x


def return_input_in_containers(x, y):
    return (x, [y, {"k": x + y}], {"x": x})


def return_constants(x):
    x = x * 2
    return 3, "text", None, (1.5, True), torch.float16


def return_none(x):
    x = x + 1


def default_and_keyword_only_arguments(x, y=None, *, scale=2.0, offset=1):
    if y is None:
        y = x
    return x * scale + y * offset


def object_attributes_and_methods(x, cfg):
    return cfg.apply(x), cfg.double_alpha, cfg.name.upper(), x * cfg.alpha


def string_formatting(x, n):
    key = f"layer_{n}"
    table = {f"layer_{i}": i * 0.5 for i in range(4)}
    label = "%s-%d" % ("n", n) + "{}".format(n)
    return x * table[key], label, key.startswith("layer"), ",".join(["a", "b"])


def list_comprehensions(x, ts):
    squares = [t_ * t_ for t_ in ts]
    evens = [i for i in range(10) if i % 2 == 0]
    table = {i: t_ for i, t_ in enumerate(ts)}
    return sum(squares) + x, evens, table[1], [s.sum() for s in squares]


def container_methods(x):
    lst = [x, x + 1, x + 2]
    last = lst.pop()
    lst.insert(0, last)
    lst.reverse()
    d = {"a": x}
    d.setdefault("b", x * 3)
    got = d.get("c", 42)
    popped = d.pop("a")
    names = ("a", "b", "a")
    return lst, d, got, popped, names.count("a"), names.index("b"), lst.copy()


def closure_over_argument_cell(x, n):
    def scale(v):
        return v * n + x

    return scale(x) + scale(1.0)


class Router(nn.Module):
    """ModuleDict loops and lookups by key."""

    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleDict({"lin": nn.Linear(4, 4), "act": nn.Tanh(), "out": nn.Linear(4, 4)})

    def forward(self, x):
        for name, expert in self.experts.items():
            x = expert(x) + len(name)
        for name in self.experts.keys():
            x = x + self.experts[name](x) * 0.1
        outs = [expert(x) for expert in self.experts.values()]
        return x, outs[-1], list(self.experts.keys())


ROUTER = Router()


def module_dict_loops(x):
    return ROUTER(x)


def same_tensor_returned_twice(x):
    y = x * 2
    return y, [y, x], {"again": x}


def inplace_through_views_of_input(x):
    x[0].add_(1)
    x.view(-1)[2] = 5.0
    x.t()[1].mul_(2)
    return x.sum()


def returns_inplace_result(x):
    return x.add_(1).mul_(0.5)


def factories_from_metadata(x, other):
    n = x.shape[0] * 2
    return (torch.zeros(n, device=x.device, dtype=other.dtype), x.to(other.dtype), torch.ones(x.size(), dtype=x.dtype),
            torch.empty_like(other).fill_(n), x.new_full((n,), 3.0))


def nested_container_inputs(xs, d):
    (a, b), (c,) = xs
    return a + b * c + d["k"] * d["w"][1], d["w"][0]


def keyword_only_tensors(x, *, y, z=None):
    return x + y if z is None else x + y + z


def positional_only_and_varargs(x, /, y, *rest, **options):
    total = x + y
    for r in rest:
        total = total * r
    return total + sum(options.values()), len(rest), sorted(options)


def constant_comparisons(x):
    a = (1, 2) < (1, 3)
    b = [1, 2] == [1, 2]
    c = x.shape == (3, 4)
    d = x.shape[-2:] == torch.Size([3, 4])
    e = "ab" in "cabd"
    return x * (a + b + c + d + e)


def optional_and_boolean_operators(x, y=None, a=0, b=3):
    y = y if y is not None else torch.zeros_like(x)
    c = a and b
    d = a or b
    return x + y * (c or 1) + (d and 2)


def int_tensor_mix(x):
    n = x.shape[1]
    return x / n, n / x.sum(), x ** n, n - x, x // n, -n * x


def delete_and_rebind(x):
    y = x * 2
    del y
    y = x + 1
    z = [y, y]
    del z[0]
    return y, z


def branches_on_tensor_metadata(x, p):
    if x.requires_grad or isinstance(p, nn.Parameter):
        x = x * p
    if x.dtype == torch.float32 and x.dim() == 2 and x.is_floating_point():
        x = x + 1
    if x.device.type == "cpu":
        x = x - 2
    return x


FULL = [
    pytest.param(locals_and_constants, lambda: (t(3, 4),), id="locals_and_constants"),
    pytest.param(globals_and_helpers, lambda: (t(3),), id="globals_and_helpers"),
    pytest.param(attribute_loads, lambda: (t(4),), id="attribute_loads"),
    pytest.param(closure_made_inside, lambda: (t(3), t(3, seed=1)), id="closure_made_inside"),
    pytest.param(nested_closures_with_nonlocal, lambda: (t(3),), id="nested_closures_with_nonlocal"),
    pytest.param(make_scaler(2.5, -1.0), lambda: (t(3),), id="closure_of_outer_function"),
    pytest.param(closure_over_argument_cell, lambda: (t(3), 4), id="closure_over_argument_cell"),
    pytest.param(lambdas_and_higher_order, lambda: (t(5),), id="lambdas_and_higher_order"),
    pytest.param(unary_ops, lambda: (t(4), t(4) > 0), id="unary_ops"),
    pytest.param(binary_ops_float, lambda: (t(3, 3) + 5, t(3, 3, seed=1) + 5), id="binary_ops_float"),
    pytest.param(binary_ops_int, lambda: (t(5, dtype=torch.int64), t(5, dtype=torch.int64, seed=1)),
                 id="binary_ops_int"),
    pytest.param(inplace_ops_on_locals, lambda: (t(4), t(4, seed=1)), id="inplace_ops_on_locals"),
    pytest.param(comparisons_tensors, lambda: (t(5), t(5, seed=1)), id="comparisons_tensors"),
    pytest.param(python_number_arithmetic, lambda: (t(2), 5), id="python_number_arithmetic"),
    pytest.param(chained_comparisons, lambda: (t(2), 5), id="chained_comparisons"),
    pytest.param(calls_with_keywords, lambda: (t(3, 4),), id="calls_with_keywords"),
    pytest.param(star_args_and_kwargs, lambda: (t(3), t(3, seed=1), t(3, seed=2)), id="star_args_and_kwargs"),
    pytest.param(tuple_list_dict_building, lambda: (t(3), t(3, seed=1)), id="tuple_list_dict_building"),
    pytest.param(unpacking, lambda: (t(4, 2), t(2, 2)), id="unpacking"),
    pytest.param(slicing_and_indexing, lambda: (t(3, 4), [1, 2, 3, 4]), id="slicing_and_indexing"),
    pytest.param(tensor_setitem, lambda: (t(3, 4),), id="tensor_setitem"),
    pytest.param(if_on_constant, lambda: (t(3), True, "square"), id="if_on_constant"),
    pytest.param(while_on_constant, lambda: (t(3), 5), id="while_on_constant"),
    pytest.param(for_over_range_and_sequences, lambda: (t(3), [t(3, seed=i) for i in range(3)]),
                 id="for_over_range_and_sequences"),
    pytest.param(loop_control, lambda: (t(2), 6), id="loop_control"),
    pytest.param(tensor_attributes, lambda: (t(2, 3),), id="tensor_attributes"),
    pytest.param(tensor_methods, lambda: (t(3, 4), t(1, dtype=torch.float64)), id="tensor_methods"),
    pytest.param(shape_arithmetic, lambda: (t(2, 3, 4),), id="shape_arithmetic"),
    pytest.param(user_module_tower, lambda: (t(5, 6),), id="user_module_tower"),
    pytest.param(conv_net, lambda: (t(2, 3, 8, 8),), id="conv_net_builtin_layers"),
    pytest.param(embedding_with_optional_mask, lambda: (torch.tensor([[1, 2, 3], [4, 5, 9]]), t(2, 3)),
                 id="embedding_with_optional_mask"),
    pytest.param(module_list_mlp, lambda: (t(4, 5),), id="module_list_mlp"),
    pytest.param(nested_user_modules, lambda: (t(3, 4),), id="nested_user_modules"),
    pytest.param(recursion_inlined, lambda: (t(3),), id="recursion_inlined"),
    pytest.param(pure_builtins, lambda: (t(2), [3, 1, 4], ("w", "b", "q")), id="pure_builtins"),
    pytest.param(functional_calls, lambda: (t(3, 4), t(5, 4)), id="functional_calls"),
    pytest.param(factory_functions, lambda: (t(2, 3), 4), id="factory_functions"),
    pytest.param(torch_ops, lambda: (t(3, 3), t(3, 3, seed=1)), id="torch_ops"),
    pytest.param(mutate_input_tensors, lambda: (t(3), t(3, seed=1)), id="mutate_input_tensors"),
    pytest.param(mutate_input_and_return_it, lambda: (t(4),), id="mutate_input_and_return_it"),
    pytest.param(default_and_keyword_only_arguments, lambda: (t(3),), id="default_and_keyword_only_arguments"),
    pytest.param(object_attributes_and_methods, lambda: (t(3), Config()), id="object_attributes_and_methods"),
    pytest.param(string_formatting, lambda: (t(2), 3), id="string_formatting"),
    pytest.param(list_comprehensions, lambda: (t(3), [t(3, seed=i) for i in range(3)]), id="list_comprehensions"),
    pytest.param(container_methods, lambda: (t(2),), id="container_methods"),
    pytest.param(return_input_in_containers, lambda: (t(3), t(3, seed=1)), id="return_input_in_containers"),
    pytest.param(return_constants, lambda: (t(3),), id="return_constants"),
    pytest.param(module_dict_loops, lambda: (t(3, 4),), id="module_dict_loops"),
    pytest.param(same_tensor_returned_twice, lambda: (t(3),), id="same_tensor_returned_twice"),
    pytest.param(inplace_through_views_of_input, lambda: (t(3, 4),), id="inplace_through_views_of_input"),
    pytest.param(returns_inplace_result, lambda: (t(3),), id="returns_inplace_result"),
    pytest.param(factories_from_metadata, lambda: (t(3), t(2, dtype=torch.float64)), id="factories_from_metadata"),
    pytest.param(nested_container_inputs, lambda: ([[t(2), t(2, seed=1)], [t(2, seed=2)]], {"k": t(2), "w": (1, t(2))}),
                 id="nested_container_inputs"),
    pytest.param(optional_and_boolean_operators, lambda: (t(3),), id="optional_and_boolean_operators"),
    pytest.param(constant_comparisons, lambda: (t(3, 4),), id="constant_comparisons"),
    pytest.param(int_tensor_mix, lambda: (t(3, 4) + 3,), id="int_tensor_mix"),
    pytest.param(delete_and_rebind, lambda: (t(3),), id="delete_and_rebind"),
    pytest.param(branches_on_tensor_metadata, lambda: (t(2, 3), nn.Parameter(torch.ones(3))),
                 id="branches_on_tensor_metadata"),
]


@pytest.mark.parametrize("fn, make_args", FULL)
def test_full_program(fn, make_args):
    args = make_args()
    diff = run_differential(fn, *args)
    assert diff.compiles_first == 1, f"expected one graph, the backend compiled {diff.compiles_first}"
    assert diff.backend.runs == 2, "both captured calls must run the compiled graph"
    assert_fully_captured(fn, *args)


@pytest.mark.parametrize("fn, kwargs", [
    pytest.param(keyword_only_tensors, lambda: {"y": t(3, seed=1)}, id="keyword_only_tensor"),
    pytest.param(keyword_only_tensors, lambda: {"y": t(3, seed=1), "z": t(3, seed=2)}, id="keyword_only_two"),
    pytest.param(positional_only_and_varargs, lambda: {"scale": 2, "bias": 1}, id="var_keyword"),
])
def test_full_program_with_keywords(fn, kwargs):
    args = (t(3), t(3, seed=3)) if fn is positional_only_and_varargs else (t(3),)
    if fn is positional_only_and_varargs:
        args += (2.0, 0.5)
    diff = run_differential(fn, *args, **kwargs())
    assert diff.compiles_first == 1
    assert_fully_captured(fn, *args, **kwargs())


# A subset of the programs through AOTAutograd (functionalization changes how mutation and aliasing are
# carried out, so these are the interesting ones).
AOT_SUBSET = {"inplace_ops_on_locals", "tensor_setitem", "mutate_input_tensors", "mutate_input_and_return_it",
              "inplace_through_views_of_input", "returns_inplace_result", "same_tensor_returned_twice",
              "user_module_tower", "conv_net_builtin_layers", "embedding_with_optional_mask", "module_dict_loops",
              "tensor_methods", "factory_functions", "return_input_in_containers", "unpacking"}


@pytest.mark.parametrize("fn, make_args", [p for p in FULL if p.id in AOT_SUBSET])
def test_full_program_aot_eager(fn, make_args):
    diff = run_differential(fn, *make_args(), backend=CountingBackend("aot_eager"))
    assert diff.compiles_first == 1


def dropout_in_eval(x):
    return F.dropout(x, p=0.5, training=False)


def test_output_that_is_an_input_keeps_identity_aot_eager():
    run_differential(dropout_in_eval, t(3), backend=CountingBackend("aot_eager"))


def test_output_that_is_an_input_keeps_identity_eager():
    run_differential(dropout_in_eval, t(3))


def named_tuple_results(x):
    top = x.topk(2, dim=-1)
    mx = x.max(dim=0)
    return top.values * 2, top.indices, mx.values + mx.indices


def test_named_tuple_results_fully_captured():
    x = t(3, 4)
    run_differential(named_tuple_results, x)
    assert_fully_captured(named_tuple_results, x)


def test_named_tuple_results_match_eager():
    run_differential(named_tuple_results, t(3, 4))


# Programs without any tensor operation: captured with no break, and nothing to compile.
NO_GRAPH = [
    pytest.param(return_input_unchanged, lambda: (t(3), t(3)), id="return_input_unchanged"),
    pytest.param(return_none, lambda: (t(3),), id="return_none_after_dead_op"),
    pytest.param(lambda n, names: (n * 2, sorted(names), {k: len(k) for k in names}), lambda: (3, ("ab", "c")),
                 id="constants_only"),
]


@pytest.mark.parametrize("fn, make_args", NO_GRAPH)
def test_program_without_graph(fn, make_args):
    args = make_args()
    diff = run_differential(fn, *args)
    out = dynacap.explain(fn)(*args)
    assert out.graph_break_count == 0, str(out)
    assert diff.compiles_first <= 1


# ---------------------------------------------------------------------------------------------------
# Programs with pieces that are not captured: only eager-equivalence is promised.
def helper_sin_cos(x):
    return torch.sin(x) * torch.cos(x) + 1


def prints_then_calls_helper(x):
    print("value of n:", 3, "shape:", tuple(x.shape))
    return helper_sin_cos(x) * 2


def data_dependent_branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def item_read(x):
    s = x.sum().item()
    return x * s, s


def boolean_mask_index(x):
    positive = x[x > 0]
    return positive * 2, positive.numel()


def unknown_c_function(x):
    checksum = zlib.crc32(b"dynacap")
    return x + checksum % 7


def stdlib_python_function(x):
    text = json.dumps({"n": x.shape[0]})
    return x * len(text)


def raises_value_error(x, n):
    y = x * 2
    if n > 2:
        raise ValueError(f"n too big: {n}")
    return y


def raises_from_helper(x):
    table = {"a": x}
    return table["missing"]


def torch_shape_error(x, y):
    return x @ y


def try_except_inside(x):
    try:
        y = x * 2
        raise KeyError("k")
    except KeyError as e:
        y = y + len(str(e))
    finally:
        y = y - 1
    return y


def with_no_grad(x, w):
    with torch.no_grad():
        y = x * w
    return y + x * w


def assert_statement(x, n):  # pytest rewrites this assert into calls of its own helpers
    assert n >= 0, "n must be non-negative"
    return x * n


# The same program as Python compiles it (pytest does not rewrite code made by exec).
_PLAIN: dict = {"torch": torch}
exec(compile("def plain_assert(x, n):\n"
             "    assert n >= 0, 'n must be non-negative'\n"
             "    return x * n\n", "<plain_assert>", "exec"), _PLAIN)
plain_assert = _PLAIN["plain_assert"]


def generator_expression(x, ts):
    return x + sum(t_ * 2 for t_ in ts)


def print_in_loop_with_list_mutation(x, log):
    for i in range(3):
        x = x * 2
        log.append(i)
        print("step", i)
    return x


def mutates_input_list_and_dict(x, lst, d):
    lst.append(x * 2)
    lst[0] = "first"
    d["new"] = x.sum()
    del d["old"]
    return len(lst)


def tolist_read(x):
    return [v * 2 for v in x.tolist()]


def deep_recursion_past_inline_limit(x):
    return deep(x, 40)


def deep(x, n):
    return x if n == 0 else deep(x + 1, n - 1)


def writes_attribute_then_prints(x, holder):
    holder.value = x * 3
    holder.count = holder.count + 1
    print("count", holder.count)
    return holder.value


def breaks_inside_callee(x):
    y = x + 1
    z = prints_then_calls_helper(y)
    return z * y


def helper_prints(v, k=1):
    w = v + k
    print("helper", k)
    return w * 2


def break_in_loop_body(x):
    out = []
    for i in range(3):
        x = x * 2
        print("iter", i)
        out.append(x.sum())
    return x, out


def break_in_callee_with_live_locals(x):
    a = x * 3
    b = [a, 1]
    c = helper_prints(a, k=2) + b[0]
    return c, b


def break_inside_no_grad(x, w):
    with torch.no_grad():
        y = x * w
        print("inside no_grad")
        z = y * w
    return z + x * w


def several_breaks(x):
    x = x + 1
    print("first")
    x = x * 2
    s = x.sum().item()
    x = x - s
    print("second", round(s, 3))
    return x


class DataBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:
            h = h * 2
        return self.b(h)


DATA_BRANCH = DataBranch()


def break_with_live_dict(x):
    d = {"a": x, "b": [x * 2]}
    print("dict")
    d["c"] = d["a"] + 1
    d["b"].append(3)
    return d


SIDE = None


def break_between_global_writes(x):
    global SIDE
    SIDE = x * 2
    print("between")
    SIDE = SIDE + 1
    return SIDE


def return_at_break_inside_loop(x):
    for i in range(5):
        if i == 2:
            print("returning")
            return x * i
        x = x + 1
    return x


def break_between_inplace_updates(x):
    x.add_(1)
    print("between updates")
    x.mul_(2)
    return x


def item_in_while_condition(x):
    n = 0
    while x.sum().item() < 10 and n < 20:
        x = x + 1
        n += 1
    return x, n


def iterate_tensor_with_data_branch(x):
    total = 0
    for v in x:
        if v > 0:
            total = total + v
    return total


class DoubledLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


class PlainSubLinear(nn.Linear):
    """A user subclass of a built-in layer that keeps torch's forward."""


DOUBLED = DoubledLinear(4, 4)
PLAIN_SUB = PlainSubLinear(4, 4)


def calls_super_forward(x):
    return DOUBLED(x) + PLAIN_SUB(x)


def creates_user_object(x):
    h = Holder()
    h.value = x * 2
    h.count += 1
    return h.value + h.count


class SlicedLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers[:2]:
            x = torch.relu(layer(x))
        return self.layers[2](x)


SLICED = SlicedLayers()


PARTIAL = [
    pytest.param(prints_then_calls_helper, lambda: (t(3),), id="print"),
    pytest.param(data_dependent_branch, lambda: (t(3),), id="data_dependent_if_true"),
    pytest.param(data_dependent_branch, lambda: (-t(3).abs(),), id="data_dependent_if_false"),
    pytest.param(item_read, lambda: (t(3),), id="item"),
    pytest.param(tolist_read, lambda: (t(3),), id="tolist"),
    pytest.param(boolean_mask_index, lambda: (t(6),), id="boolean_mask_dynamic_shape"),
    pytest.param(unknown_c_function, lambda: (t(3),), id="unknown_c_function"),
    pytest.param(stdlib_python_function, lambda: (t(3),), id="stdlib_python_function"),
    pytest.param(raises_value_error, lambda: (t(3), 5), id="raise_value_error"),
    pytest.param(raises_value_error, lambda: (t(3), 1), id="raise_not_taken"),
    pytest.param(raises_from_helper, lambda: (t(3),), id="key_error"),
    pytest.param(torch_shape_error, lambda: (t(2, 3), t(2, 3)), id="torch_shape_error"),
    pytest.param(try_except_inside, lambda: (t(3),), id="try_except_finally"),
    pytest.param(with_no_grad, lambda: (t(3), t(3).requires_grad_()), id="with_no_grad"),
    pytest.param(plain_assert, lambda: (t(3), -1), id="assert_fails"),
    pytest.param(plain_assert, lambda: (t(3), 2), id="assert_passes"),
    pytest.param(assert_statement, lambda: (t(3), -1), id="pytest_rewritten_assert_fails"),
    pytest.param(generator_expression, lambda: (t(3), [t(3, seed=1), t(3, seed=2)]), id="generator_expression"),
    pytest.param(print_in_loop_with_list_mutation, lambda: (t(3), []), id="print_in_loop_and_list_append"),
    pytest.param(mutates_input_list_and_dict, lambda: (t(3), [1, 2], {"old": 1}), id="mutate_input_list_and_dict"),
    pytest.param(deep_recursion_past_inline_limit, lambda: (t(2),), id="deep_recursion"),
    pytest.param(breaks_inside_callee, lambda: (t(3),), id="break_inside_callee"),
    pytest.param(calls_super_forward, lambda: (t(2, 4),), id="super_forward_and_layer_subclass"),
    pytest.param(creates_user_object, lambda: (t(3),), id="creates_user_object"),
    pytest.param(break_in_loop_body, lambda: (t(3),), id="break_in_loop_body"),
    pytest.param(break_in_callee_with_live_locals, lambda: (t(3),), id="break_in_callee_with_live_locals"),
    pytest.param(break_inside_no_grad, lambda: (t(3), t(3, seed=1).requires_grad_()), id="break_inside_no_grad"),
    pytest.param(several_breaks, lambda: (t(3),), id="several_breaks"),
    pytest.param(DATA_BRANCH, lambda: (t(2, 3),), id="module_data_branch_a"),
    pytest.param(DATA_BRANCH, lambda: (-t(2, 3),), id="module_data_branch_b"),
    pytest.param(break_with_live_dict, lambda: (t(3),), id="break_with_live_dict"),
    pytest.param(break_between_global_writes, lambda: (t(3),), id="break_between_global_writes"),
    pytest.param(return_at_break_inside_loop, lambda: (t(3),), id="return_at_break_inside_loop"),
    pytest.param(break_between_inplace_updates, lambda: (t(3),), id="break_between_inplace_updates"),
    pytest.param(item_in_while_condition, lambda: (t(3),), id="item_in_while_condition"),
    pytest.param(iterate_tensor_with_data_branch, lambda: (t(4),), id="iterate_tensor_with_data_branch"),
]


def sorts_a_local_list(x):
    order = [3, 1, 2]
    order.sort()  # not captured: runs eagerly at a graph break
    return x * order[0], order


def opaque_call_mutates_a_local_list(x):
    items = [x, x * 2, x * 3]
    operator.delitem(items, 0)  # an opaque C function: runs eagerly at a graph break
    return items


@pytest.mark.parametrize("fn", [sorts_a_local_list, opaque_call_mutates_a_local_list])
def test_eager_mutation_of_local_list_at_a_break(fn):
    run_differential(fn, t(2))


def test_module_list_slice_hits_the_cache():
    run_differential(SLICED, t(2, 4))
    assert_fully_captured(SLICED, t(2, 4))


def test_module_list_slice_matches_eager():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_differential(SLICED, t(2, 4), check_cache=False)


@pytest.mark.parametrize("fn, make_args", PARTIAL)
def test_partial_program(fn, make_args):
    args = make_args()
    run_differential(fn, *args)


def test_partial_program_mutating_a_user_object():
    """A fresh ``Holder`` per run: the program reads and writes its attributes, then prints them."""
    x = t(3)
    run_differential(writes_attribute_then_prints, fresh_inputs=lambda: ((x.clone(), Holder()), {}),
                     check_cache=False)


# ---------------------------------------------------------------------------------------------------
# Specialisation on constants: another constant recompiles and gives that constant's eager answer.
@pytest.mark.parametrize("fn, first, second", [
    pytest.param(if_on_constant, (True, "square"), (False, "double"), id="if"),
    pytest.param(if_on_constant, (True, "square"), (True, "none"), id="elif"),
    pytest.param(while_on_constant, (5,), (2,), id="while"),
    pytest.param(loop_control, (6,), (3,), id="for_else"),
    pytest.param(python_number_arithmetic, (5,), (1,), id="arithmetic"),
    pytest.param(chained_comparisons, (5,), (3,), id="chained_comparisons"),
    pytest.param(factory_functions, (4,), (6,), id="arange_length"),
    pytest.param(string_formatting, (3,), (1,), id="string_key"),
])
def test_constant_specialisation_is_guarded(fn, first, second):
    x = t(2, 3) if fn is factory_functions else t(2)
    backend = CountingBackend()
    run_differential(fn, x, *first, backend=backend)
    compiles = backend.compiles
    assert compiles == 1
    run_differential(fn, x, *second, backend=backend, reset=False)
    assert backend.compiles == compiles + 1, "a different constant must recompile"
    # Both specialisations now live in the cache: going back to the first constant compiles nothing.
    run_differential(fn, x, *first, backend=backend, reset=False)
    assert backend.compiles == compiles + 1


# ---------------------------------------------------------------------------------------------------
# Side effects: global writes, attribute writes, module state.
COUNTER = 0
LAST = None


def writes_globals(x):
    global COUNTER, LAST
    COUNTER = COUNTER + 1
    LAST = x * 2
    return LAST + COUNTER


def test_global_writes_visible_after_call():
    global COUNTER, LAST
    x = t(3)
    COUNTER, LAST = 10, None
    expected = writes_globals(x.clone())
    expected_state = (COUNTER, LAST)

    backend = CountingBackend()
    captured = dynacap.optimize(writes_globals, backend=backend)
    COUNTER, LAST = 10, None
    result = captured(x.clone())
    torch.testing.assert_close(result, expected)
    assert COUNTER == expected_state[0]
    torch.testing.assert_close(LAST, expected_state[1])
    assert backend.compiles == 1

    # The counter is now 11: the guard on its value fails, a recompile gives the eager answer.
    COUNTER = 11
    expected2 = writes_globals(x.clone())
    state2 = (COUNTER, LAST)
    COUNTER = 11
    result2 = captured(x.clone())
    torch.testing.assert_close(result2, expected2)
    assert COUNTER == state2[0] == 12
    torch.testing.assert_close(LAST, state2[1])
    COUNTER, LAST = 0, None
    out = dynacap.explain(writes_globals)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)
    COUNTER, LAST = 0, None


def writes_attributes(x, holder, cfg):
    holder.value = x * cfg.alpha
    holder.count = holder.count + 1
    cfg.alpha = cfg.alpha * 2
    return holder.value + cfg.alpha


def test_attribute_writes_visible_after_call():
    x = t(3)
    h_e, c_e = Holder(), Config(alpha=0.5)
    expected = writes_attributes(x, h_e, c_e)
    h_c, c_c = Holder(), Config(alpha=0.5)
    backend = CountingBackend()
    captured = dynacap.optimize(writes_attributes, backend=backend)
    result = captured(x, h_c, c_c)
    torch.testing.assert_close(result, expected)
    torch.testing.assert_close(h_c.value, h_e.value)
    assert (h_c.count, c_c.alpha) == (h_e.count, c_e.alpha)
    # Calling again: the new attribute values are seen (guards on them), like eager.
    expected = writes_attributes(x, h_e, c_e)
    result = captured(x, h_c, c_c)
    torch.testing.assert_close(result, expected)
    assert (h_c.count, c_c.alpha) == (h_e.count, c_e.alpha) == (2, 2.0)
    out = dynacap.explain(writes_attributes)(x, Holder(), Config())
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)


class Accumulator(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("running", torch.zeros(3))
        self.calls = 0

    def forward(self, x):
        y = self.lin(x)
        self.running.mul_(0.9).add_(y.detach().mean(0) * 0.1)
        self.calls = self.calls + 1
        self.last_shape = tuple(y.shape)
        return y + self.running


def test_module_buffer_mutation_and_attribute_write():
    torch.manual_seed(0)
    eager_mod = Accumulator()
    captured_mod = Accumulator()
    captured_mod.load_state_dict(eager_mod.state_dict())
    backend = CountingBackend()
    opt = dynacap.optimize(captured_mod, backend=backend)
    for i in range(3):
        x = t(2, 3, seed=i)
        torch.testing.assert_close(opt(x), eager_mod(x))
        torch.testing.assert_close(captured_mod.running, eager_mod.running)
        assert captured_mod.calls == eager_mod.calls
        assert captured_mod.last_shape == eager_mod.last_shape
    assert backend.compiles >= 1


def test_requires_grad_flows_through_captured_graph():
    w = t(3, 3).requires_grad_()

    def fn(x, w):
        return (torch.tanh(x @ w) * 2).sum()

    x = t(2, 3)
    diff = run_differential(fn, x, w)
    assert diff.result.requires_grad
    # Gradients equal eager.
    w1 = w.detach().clone().requires_grad_()
    fn(x, w1).backward()
    w2 = w.detach().clone().requires_grad_()
    dynacap.optimize(fn, backend="eager")(x, w2).backward()
    torch.testing.assert_close(w2.grad, w1.grad)


def test_training_module_with_dropout_in_train_mode_matches_with_seed():
    mod = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = t(3, 4)
    torch.manual_seed(123)
    expected = mod(x)
    opt = dynacap.optimize(mod, backend=CountingBackend())
    torch.manual_seed(123)
    torch.testing.assert_close(opt(x), expected)
