"""NumPy in captured code (issue 9 item 5): arrays made from tensors traced as torch ops, NumPy on constants
run for real, NumPy randomness always eager.

Each test runs the program eagerly and captured (twice: the second call must hit the cache) and compares
results by type, dtype, shape and values (NumPy arrays and scalars included), inputs after the call, then
graph and break counts.
"""
import numpy as np
import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same, clone_inputs

BACKENDS = ["eager", "aot_eager"]


def same(expected, actual, path="result"):
    """``assert_same`` that also compares NumPy arrays and scalars (type, dtype, shape, values)."""
    if isinstance(expected, (np.ndarray, np.generic)):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert np.shape(actual) == np.shape(expected), f"{path}: shape {np.shape(actual)} != {np.shape(expected)}"
        # torch's kernels may round differently from NumPy's by an ulp (sqrt, exp): as torch.compile's do.
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-7, equal_nan=True, err_msg=path)
    elif type(expected) in (tuple, list):
        assert type(actual) is type(expected) and len(actual) == len(expected), f"{path}: {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            same(e, a, f"{path}[{i}]")
    else:
        assert_same(expected, actual, path)


def differential(fn, *args, backend="eager", seed=None):
    """Eager vs captured (twice), results and inputs after the call compared; the counting backend."""
    dynacap.reset()
    counting = CountingBackend(None if backend == "eager" else backend)
    captured = dynacap.optimize(fn, backend=counting)
    e_args = clone_inputs(args)
    if seed is not None:
        np.random.seed(seed)
    expected = fn(*e_args)
    for call in ("first", "second"):
        c_args = clone_inputs(args)
        if seed is not None:
            np.random.seed(seed)
        same(expected, captured(*c_args), f"{call} captured call")
        same(e_args, c_args, f"inputs after the {call} captured call")
    return counting


def counts(fn, *args):
    dynacap.reset()
    out = dynacap.explain(fn)(*clone_inputs(args))
    return out.graph_count, out.graph_break_count, [str(r) for r in out.break_reasons]


def t(*shape, dtype=torch.float32):
    torch.manual_seed(sum(shape))
    if dtype.is_floating_point:
        return torch.randn(*shape, dtype=dtype)
    return torch.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 5


# -- arrays made from tensors ------------------------------------------------------------------------

def ufuncs(x):
    a = np.asarray(x)
    return torch.from_numpy(np.add(np.sqrt(np.abs(a)), np.tanh(a))) * 2, np.exp(np.negative(a))


def reductions(x):
    a = np.asarray(x)
    return a.sum(), np.mean(a, axis=0), a.std(ddof=1), np.argmax(a, axis=1), a.max(axis=-1, keepdims=True)


def shapes(x):
    a = np.asarray(x)
    return a.reshape(5, 4).T, np.transpose(a), a.swapaxes(0, 1).ravel(), np.expand_dims(a, 0).shape, a.ndim


def indexing(x):
    a = np.asarray(x)
    return a[1:, 2], a[1, 2], a[..., None][0], [row.sum() for row in a]


def with_scalars(x):
    a = np.asarray(x)
    return np.multiply(a, 3.0), np.add(a, np.float64(1.0)), np.power(a, 2), np.clip(a, -0.5, 0.5)


def joins(x):
    a = np.asarray(x)
    return np.concatenate([a, a], axis=0), np.stack([a, a]), np.where(np.greater(a, 0), a, 0.0), np.split(a, 2)


def matmul(x):
    a = np.asarray(x)
    return np.matmul(a, a.T), np.dot(a[0], a[1]), np.einsum("ij,kj->ik", a, a)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", [ufuncs, reductions, shapes, indexing, with_scalars, joins, matmul])
def test_numpy_on_arrays_from_tensors_is_one_graph(program, backend):
    counting = differential(program, t(4, 5), backend=backend)
    assert counting.compiles == 1
    assert counts(program, t(4, 5))[:2] == (1, 0)


def dynamic_program(x):
    a = np.asarray(x)
    return torch.from_numpy(np.tanh(np.multiply(a, 2.0)).sum(axis=0)) + 1, a.shape, np.mean(a, axis=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_arrays_with_dynamic_sizes_stay_in_the_graph(backend):
    dynacap.reset()
    counting = CountingBackend(None if backend == "eager" else backend)
    captured = dynacap.optimize(dynamic_program, backend=counting)
    for n in (4, 6, 8, 10):
        x = t(n, 3)
        same(dynamic_program(x), captured(x), f"size {n}")
    assert counting.compiles == 2  # static, then one graph for every size (automatic dynamic)
    dynacap.reset()
    out = dynacap.explain(dynamic_program)(t(4, 3))
    assert (out.graph_count, out.graph_break_count) == (1, 0)


def test_results_are_numpy_objects_of_numpy_types():
    """What NumPy returns is what the captured program returns: arrays, NumPy scalars (not 0-d arrays)."""
    x = t(4, 5)
    out = dynacap.optimize(reductions, backend="eager")(x)
    assert [type(v) for v in out] == [np.float32, np.ndarray, np.float32, np.ndarray, np.ndarray]
    assert out[3].dtype == np.int64
    assert counts(reductions, x)[:2] == (1, 0)


def test_graph_holds_torch_operations_only():
    counting = differential(ufuncs, t(3, 3))
    nodes = [n for n in counting.graphs[0].graph.nodes if n.op == "call_function"]
    assert len(nodes) == 8  # abs, sqrt, tanh, add, alias (from_numpy), mul, negative, exp: asarray is no node
    assert not any((getattr(n.target, "__module__", None) or "").startswith("numpy") for n in nodes)
    assert not any(isinstance(a, (np.ndarray, np.generic)) for n in nodes for a in n.args)


@pytest.mark.parametrize("case", [
    (lambda a: np.multiply(a, np.float64(3.0)), torch.float32),  # NEP 50: a NumPy float64 scalar promotes
    (lambda a: np.multiply(a, 3.0), torch.float32),  # a Python float does not
    (lambda a: np.multiply(a, 1.5), torch.int64),
    (lambda a: np.add(a, np.int64(3)), torch.int32),
    (lambda a: np.mean(a), torch.int64),
    (lambda a: np.sum(a, dtype=np.float64), torch.float32),
    (lambda a: np.add(a.astype(np.int32), np.int8(1)), torch.float32),
    (lambda a: np.multiply(np.float32(a), 2), torch.float64),
    (lambda a: np.greater(a, 0).sum(), torch.float32),
], ids=["f32*np.float64", "f32*float", "i64*float", "i32+np.int64", "mean(i64)", "sum(dtype=f64)", "astype",
        "np.float32(a)", "count"])
def test_dtype_promotion_is_numpys(case):
    fn, dtype = case

    def program(x):
        return fn(np.asarray(x))

    differential(program, t(4, 5, dtype=dtype))
    assert counts(program, t(4, 5, dtype=dtype))[:2] == (1, 0)


def test_where_torch_numpy_promotes_differently_it_breaks():
    """int64 / int: NumPy gives float64, torch's NumPy float32: a break, and the eager result."""
    def program(x):
        return np.true_divide(np.asarray(x), 2)

    differential(program, t(4, 5, dtype=torch.int64))
    graphs, breaks, reasons = counts(program, t(4, 5, dtype=torch.int64))
    assert breaks >= 1 and "where NumPy computes float64" in reasons[0]


def test_where_torch_numpy_returns_another_shape_it_breaks():
    """`np.percentile(a, 90)`: a NumPy scalar, where torch's NumPy gives an array of shape (1,)."""
    def program(x):
        return np.percentile(x.numpy(), 90), x + 1

    differential(program, t(3, 4))
    assert "gives shape (1,) where NumPy gives ()" in counts(program, t(3, 4))[2][0]


def test_complex_fft_dtype_differs_and_breaks():
    def program(x):
        return np.fft.fft(np.asarray(x))

    differential(program, t(4, 8))
    assert "complex64" in counts(program, t(4, 8))[2][0]


def test_from_numpy_is_a_new_tensor_sharing_memory():
    def program(x):
        y = torch.from_numpy(np.asarray(x))
        y.add_(1)  # writes x through the shared memory, as eager does
        return y is x, torch.as_tensor(np.asarray(x)) is x, y

    differential(program, t(3))
    assert counts(program, t(3))[:2] == (1, 0)


def test_torch_tensor_of_an_array_copies():
    def program(x):
        y = torch.tensor(np.asarray(x), dtype=torch.float64)
        y.add_(1)
        return y, x

    differential(program, t(3))
    assert counts(program, t(3))[:2] == (1, 0)


def test_mixed_torch_and_numpy_under_fullgraph_is_one_graph():
    def program(x, w):
        h = torch.relu(x @ w)
        a = np.tanh(np.multiply(np.asarray(h.detach()), np.float32(0.5)))
        z = torch.from_numpy(np.concatenate([a, np.ones_like(a)], axis=1).astype(np.float32))
        return (z.sum(dim=1) + x.sum(dim=1)).softmax(0)

    counting = CountingBackend()
    x, w = t(4, 3), t(3, 6)
    out = dynacap.optimize(program, backend=counting, fullgraph=True)(x, w)
    same(program(x, w), out)
    assert counting.compiles == 1
    assert differential(program, x, w, backend="aot_eager").compiles == 1


def test_numpy_graph_under_inductor():
    def program(x):
        a = np.tanh(np.multiply(np.asarray(x), 2.0))
        return torch.from_numpy(np.add(a, np.float32(1.0))).relu() + 1, np.sum(a, axis=0)

    assert differential(program, t(8, 8), backend="inductor").compiles == 1


def test_array_live_at_a_break_is_a_real_array_after_it():
    def program(x):
        a = np.sqrt(np.abs(np.asarray(x)))
        print("between")  # a graph break with `a` live
        return a, x + 1

    differential(program, t(3, 2))
    assert counts(program, t(3, 2))[:2] == (2, 1)  # the NumPy ops, the print, `x + 1`


def test_writing_into_an_array_breaks_and_changes_the_tensor_as_eager():
    def program(x):
        a = np.asarray(x)
        a[0] = 7.0
        return x * 2

    differential(program, t(3))
    assert "writing into" in counts(program, t(3))[2][0]


def test_tensor_given_to_a_numpy_function_breaks():
    """Eager NumPy turns a tensor into an array, or back into a tensor through `__array_wrap__`."""
    def program(x):
        return np.concatenate([x, x])

    differential(program, t(3))
    assert "given a torch tensor" in counts(program, t(3))[2][0]


# -- NumPy on constants ------------------------------------------------------------------------------

def constants(x):
    return x * np.float32(2.0) + np.sqrt(4.0) + np.pi + np.float32(1.5) * 2 + np.finfo(np.float32).eps


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_on_constants_runs_at_capture_time(backend):
    assert differential(constants, t(4), backend=backend).compiles == 1
    assert counts(constants, t(4))[:2] == (1, 0)


def test_arrays_of_constants_are_graph_nodes():
    def program(x):
        return x + torch.from_numpy(np.arange(5)) + torch.as_tensor(np.linspace(0, 1, 5, dtype=np.float32)) \
            + torch.from_numpy(np.zeros((4, 1)))

    differential(program, t(4, 5), backend="aot_eager")
    assert counts(program, t(4, 5))[:2] == (1, 0)


def test_arrays_of_constants_have_known_values():
    """`np.linspace(...)` iterated, `.tolist()`, `int(arr[i])`: NumPy's own values, no break."""
    def program(x):
        out = x
        for s in np.linspace(0.5, 1.5, 3):
            out = out * float(s)
        return out, np.arange(3).tolist(), int(np.arange(5)[2]), bool(np.ones(2).all())

    differential(program, t(5))
    assert counts(program, t(5))[:2] == (1, 0)


def test_known_values_are_forgotten_once_a_tensor_shares_the_memory():
    def program(x):
        c = np.zeros(3)
        torch.from_numpy(c).add_(1)  # changes c, as eager does
        return np.sum(c), x + 1, c.tolist()

    differential(program, t(3))
    graphs, breaks, reasons = counts(program, t(3))
    assert breaks == 1 and "`.tolist()` reads" in reasons[0]


def test_constant_numpy_results_keep_their_type():
    def program(x):
        return np.float32(2.0) * 3, np.sqrt(np.float64(2.0)), np.int64(7) // 2, np.float32(1.0).dtype, x + 1

    out = dynacap.optimize(program, backend="eager")(t(2))
    assert [type(v) for v in out[:3]] == [np.float32, np.float64, np.int64]
    differential(program, t(2))
    assert counts(program, t(2))[:2] == (1, 0)


SCALE = np.float32(0.5)


def scaled(x):
    return x * SCALE


def test_numpy_scalar_from_the_frame_is_guarded_by_type_and_value():
    global SCALE
    counting = differential(scaled, t(3))
    captured = dynacap.optimize(scaled, backend=counting)
    try:
        for value in (np.float32(0.25), np.float64(0.25), np.float32(-0.0), np.float32(0.25)):
            SCALE = value
            same(scaled(t(3)), captured(t(3)), f"SCALE={value!r}")
        assert counting.compiles == 4  # 0.5, 0.25 as float32, as float64, -0.0; 0.25 again hits the cache
    finally:
        SCALE = np.float32(0.5)


TABLE = np.ones(3, dtype=np.float32)


def with_table(x):
    return x + torch.from_numpy(np.multiply(TABLE, 2)), TABLE


def test_numpy_array_from_the_frame_is_a_graph_input_guarded_by_dtype_and_shape():
    global TABLE
    assert counts(with_table, t(3))[:2] == (1, 0)
    counting = differential(with_table, t(3))
    captured = dynacap.optimize(with_table, backend=counting)
    try:
        TABLE[1] = 5.0  # same array, new values: the graph reads them
        out = captured(t(3))
        same(with_table(t(3)), out)
        assert out[1] is TABLE  # the frame's own array comes back, not a new one over its memory
        assert counting.compiles == 1
        for table in (np.ones(4, dtype=np.float32)[:3], np.ones(3, dtype=np.float64), np.ones((2, 3))):
            TABLE = table
            same(with_table(t(3)), captured(t(3)), f"TABLE={table!r}")
        assert counting.compiles == 3  # float64, then its shape (the float32 view of 3 items hits the cache)
    finally:
        TABLE = np.ones(3, dtype=np.float32)


def test_read_only_numpy_array_from_the_frame_breaks():
    table = np.ones(3, dtype=np.float32)
    table.flags.writeable = False

    def program(x):
        return x + torch.from_numpy(np.multiply(table, 2))

    differential(program, t(3))
    assert "torch.from_numpy cannot share" in counts(program, t(3))[2][0]


# -- NumPy randomness --------------------------------------------------------------------------------

def test_numpy_random_always_runs_eagerly():
    def program(x):
        noise = np.random.randn(3).astype(np.float32)
        return x + torch.from_numpy(noise), np.random.rand()

    differential(program, t(3), seed=0)
    graphs, breaks, reasons = counts(program, t(3))
    assert "NumPy randomness runs eagerly" in reasons[0]


def test_numpy_random_generator_runs_eagerly():
    rng_seed = 3

    def program(x):
        rng = np.random.default_rng(rng_seed)
        return x * rng.normal()

    differential(program, t(3))
    assert all("NumPy randomness runs eagerly" in r for r in counts(program, t(3))[2])


# -- `x.numpy()` and operators --------------------------------------------------------------------

def with_operators(x):
    a = x.numpy()
    b = (a * 2.0 + 1) / np.float32(3.0) - a ** 2
    return torch.from_numpy(np.sqrt(np.abs(b))) + 1, (a > 0).sum(), -a, a @ a.T, a[0] == a[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_x_numpy_and_operators_are_one_graph(backend):
    assert differential(with_operators, t(4, 5), backend=backend).compiles == 1
    assert counts(with_operators, t(4, 5))[:2] == (1, 0)


def test_len_and_abs_of_arrays():
    def program(x):
        a = x.numpy()
        return abs(a) * len(a), x * len(a)

    for backend in BACKENDS:
        assert differential(program, t(4, 3), backend=backend).compiles == 1
    assert counts(program, t(4, 3))[:2] == (1, 0)


def test_x_numpy_and_operators_beside_torch_compile():
    assert counts(with_operators, t(4, 4))[:2] == (1, 0)
    assert 1 <= _dynamo_graphs(with_operators, t(4, 4))


def test_gaussian_kernel_from_numpy_constants():
    def program(x):
        k = np.exp(-np.arange(-2, 3) ** 2 / 2.0)
        k = k / k.sum()
        return torch.conv1d(x[None, None], torch.from_numpy(k).float()[None, None], padding=2)[0, 0]

    differential(program, t(8), backend="aot_eager")
    assert counts(program, t(8))[:2] == (1, 0)


def test_x_numpy_where_eager_raises_breaks():
    def program(x):
        return x.numpy() * 2

    differential(program, t(3))
    x = t(3).requires_grad_()
    dynacap.reset()
    counting = CountingBackend()
    with pytest.raises(RuntimeError, match="requires grad"):
        program(x)
    with pytest.raises(RuntimeError, match="requires grad"):  # from the user's line, run eagerly
        dynacap.optimize(program, backend=counting)(x)
    assert counting.compiles == 0


def test_in_place_operator_on_an_array_breaks_and_changes_the_tensor():
    def program(x):
        a = x.numpy()
        a += 1
        return x * 2

    differential(program, t(3))
    assert "in-place" in counts(program, t(3))[2][0]


def test_operator_between_tensor_and_numpy_value_breaks():
    def program(x):
        return x * np.sum(x.numpy())  # eager: a tensor (the NumPy scalar as a Python number)

    differential(program, t(3))
    assert counts(program, t(3))[1] >= 1


# -- module programs in the style of crawled code ----------------------------------------------------

class ScaledAttention(torch.nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.q, self.k, self.d = torch.nn.Linear(d, d), torch.nn.Linear(d, d), d

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(-2, -1) / np.sqrt(self.d)
        return scores.softmax(-1)


class FlattenByProd(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, int(np.prod(x.size()[1:]))) * np.float32(0.5)


class NumpyPositionalTable(torch.nn.Module):
    """A table computed with NumPy in ``__init__`` and read in ``forward``: a graph input, not a constant."""

    def __init__(self, n=16, d=8):
        super().__init__()
        pos = np.arange(n)[:, None]
        self.table = np.sin(pos / np.power(10000, np.arange(d) / d)).astype(np.float32)

    def forward(self, x):
        return x + torch.from_numpy(self.table[: x.shape[1]])


class NumpyPostprocess(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        probs = self.fc(x).softmax(-1)
        top = np.argmax(np.asarray(probs.detach()), axis=-1)
        return probs, top, np.bincount(top, minlength=3)


class AccuracyMetric(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x, labels):
        logits = self.fc(x)
        pred = logits.data.cpu().numpy().argmax(axis=1)
        return logits, np.mean(pred == labels.numpy())


class CausalMask(torch.nn.Module):
    def forward(self, x):
        n = x.size(1)
        mask = torch.from_numpy(np.triu(np.ones((1, n, n)), k=1).astype("uint8")) == 0
        return x.masked_fill(~mask[0, :x.size(0)], 0.0)


class BatchStats(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        stats = y.detach().numpy()
        return y, stats.mean(), stats.std(axis=0), np.median(stats, axis=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [(AccuracyMetric, lambda: (t(5, 8), torch.tensor([0, 1, 2, 1, 0]))),
                                  (CausalMask, lambda: (t(4, 4),)), (BatchStats, lambda: (t(3, 4),))],
                         ids=lambda c: c[0].__name__)
def test_module_programs_with_x_numpy(case, backend):
    model, make_args = case
    torch.manual_seed(0)
    m = model()
    assert counts(m, *make_args())[:2] == (1, 0)
    assert differential(m, *make_args(), backend=backend).compiles == 1
    assert 1 <= _dynamo_graphs(m, *make_args())


@pytest.mark.filterwarnings("ignore:Dynamo does not know")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", [ScaledAttention, FlattenByProd, NumpyPositionalTable],
                         ids=lambda m: m.__name__)
def test_module_programs_with_numpy(model, backend):
    torch.manual_seed(0)
    m = model()
    x = t(2, 4, 8)
    assert counts(m, x)[:2] == (1, 0)
    assert differential(m, x, backend=backend).compiles == 1
    assert 1 <= _dynamo_graphs(m, x)


def test_data_dependent_numpy_output_shape_breaks():
    """`np.bincount`'s length depends on the data, as `torch.bincount`'s: the graph stops before it."""
    torch.manual_seed(0)
    m = NumpyPostprocess()
    x = t(5, 8)
    differential(m, x)
    graphs, breaks, reasons = counts(m, x)
    assert graphs == 1 and breaks == 1 and "bincount" in reasons[0]


# -- beside torch.compile ----------------------------------------------------------------------------

def _dynamo_graphs(fn, *args):
    import torch._dynamo

    torch._dynamo.reset()
    try:
        out = torch._dynamo.explain(fn)(*clone_inputs(args))
    finally:
        torch._dynamo.reset()
    return out.graph_count


@pytest.mark.parametrize("program", [ufuncs, reductions, joins, constants])
def test_graph_counts_beside_torch_compile(program):
    graphs, breaks, _ = counts(program, t(4, 4))
    assert (graphs, breaks) == (1, 0)
    assert graphs <= _dynamo_graphs(program, t(4, 4))
