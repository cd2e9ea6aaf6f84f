"""``config.capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` (issue 9 item 6).

Off (the default): ``.item()``, ``int(t)``, ``.tolist()``, ``nonzero``, masks and ``unique`` are
clean graph breaks.  On: they stay in the graph as unbacked symbols / data-dependent sizes, one
graph for every data value, and Python code that needs such a value (``if t.item() > 0``)
breaks cleanly.  Every program runs eagerly and captured (``run_differential``), with several
data values through one compiled function; a few rows compare graph counts with torch.compile's.
"""
import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same, clone_inputs, run_differential

BACKENDS = ["eager", "aot_eager"]
ON = dict(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True)


def _branch_on_item(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


def _branch_on_nonzero_size(x):
    idx = x.nonzero()
    if idx.shape[0] > 3:
        return idx + 1
    return idx - 1


SCALARS = {
    "item_times_tensor": lambda x: x * x.sum().item(),
    "int_item": lambda x: x.sum(dtype=torch.long) + (x > 0).sum().item(),
    "items_returned": lambda x: (x.sum().item(), x.max().item(), (x > 0).any().item()),
    "item_as_size": lambda x: torch.zeros((x > 0).sum().item()) + x.sum().item(),
    "int_and_float_of_tensor": lambda x: x * int((x > 0).sum()) + float(x.sum()),
    "int_truncates_float": lambda x: x * int(x.sum() * 10),
    "float_of_int_tensor": lambda x: x * float((x > 0).sum()),
    "tolist": lambda x: [v * 2 for v in x[0].tolist()],
    "tolist_2d": lambda x: x[:2, :2].tolist(),
    "tolist_0d": lambda x: x.sum().tolist() * x,
}
SHAPES = {
    "nonzero": lambda x: x.nonzero() + 1,
    "mask": lambda x: x[x > 0] * 2,
    "mask_and_nonzero_size": lambda x: x[x > 0].sum() + x.nonzero().shape[0],
    "unique": lambda x: torch.unique((x > 0).long() + (x > 0.5).long()) + 1,
    "masked_select": lambda x: torch.masked_select(x, x > 0).sum(),
    "len_of_nonzero": lambda x: x + len(x.nonzero()),
    "mask_view": lambda x: x[x > 0].view(-1, 1) * 2,
}
BREAKS_WHEN_ON = {
    "branch_on_item": _branch_on_item,
    "branch_on_nonzero_size": _branch_on_nonzero_size,
    "iterate_nonzero": lambda x: [r for r in x.nonzero()],
    "slice_by_item": lambda x: x[:x.sum().long().abs().item()] * 2,
    "tensor_of_item": lambda x: torch.tensor([x.sum().item(), 1.0]),
    "round_item": lambda x: x * round(x.sum().item(), 2),
}


def inputs():
    """Data with different counts of positive entries (and sums of both signs)."""
    for shift in (-1.0, -0.2, 0.3, 1.0):
        torch.manual_seed(0)
        yield torch.randn(4, 5) + shift


def check_all_data(fn, backend, graphs):
    """One compiled function over every input of ``inputs()``: eager's results, ``graphs`` compiles."""
    counting = CountingBackend(backend)
    compiled = dynacap.optimize(fn, backend=counting)
    for x in inputs():
        run_differential(fn, x, backend=counting, reset=False, check_cache=False)
        assert_same(fn(x.clone()), compiled(x.clone()))
    assert len(counting.graphs) == graphs, counting.graphs


@pytest.mark.parametrize("name", sorted(SCALARS) + sorted(SHAPES))
def test_default_off_breaks(name):
    fn = {**SCALARS, **SHAPES}[name]
    x = next(inputs())
    assert run_differential(fn, x).graph_count >= 1
    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(fn, backend=CountingBackend(), fullgraph=True)(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SCALARS))
def test_scalar_outputs_one_graph(name, backend):
    fn = SCALARS[name]
    with dynacap.config.patch(capture_scalar_outputs=True):
        dynacap.optimize(fn, backend=CountingBackend(backend), fullgraph=True)(next(inputs()))
        dynacap.reset()
        check_all_data(fn, backend, graphs=1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_dynamic_output_shapes_one_graph(name, backend):
    fn = SHAPES[name]
    with dynacap.config.patch(capture_dynamic_output_shape_ops=True):
        dynacap.optimize(fn, backend=CountingBackend(backend), fullgraph=True)(next(inputs()))
        dynacap.reset()
        check_all_data(fn, backend, graphs=1)


def test_each_setting_alone():
    """``.item()`` needs capture_scalar_outputs, ``nonzero`` capture_dynamic_output_shape_ops."""
    x = next(inputs())
    with dynacap.config.patch(capture_dynamic_output_shape_ops=True):
        assert run_differential(SCALARS["item_times_tensor"], x).graph_count == 2
    with dynacap.config.patch(capture_scalar_outputs=True):
        assert run_differential(SHAPES["mask"], x).graph_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(BREAKS_WHEN_ON))
def test_python_use_of_data_dependent_value_breaks(name, backend):
    fn = BREAKS_WHEN_ON[name]
    with dynacap.config.patch(**ON):
        counting = CountingBackend(backend)
        for x in inputs():
            run_differential(fn, x, backend=counting, reset=False, check_cache=False)
        out = dynacap.explain(fn)(next(inputs()))
        assert out.graph_break_count >= 1
        for reason in out.break_reasons:
            text = str(reason)
            assert "zuf" not in text and "u0" not in text and "internal error" not in text, text


def test_branch_on_item_resumes_into_both_branches():
    with dynacap.config.patch(**ON):
        check_all_data(_branch_on_item, "eager", graphs=3)  # the test, then one graph per branch


def test_dynamic_trace_keeps_settings():
    """A trace with symbolic inputs (``dynamic=True``) has a ShapeEnv anyway: off still breaks."""
    fn = lambda x: x.nonzero().float().sum() + x.sum().item() * x.shape[0]  # noqa: E731
    for settings, graphs in (({}, 4), (ON, 1)):
        with dynacap.config.patch(**settings):
            dynacap.reset()
            counting = CountingBackend("aot_eager")
            compiled = dynacap.optimize(fn, backend=counting, dynamic=True)
            for n in (3, 5, 7):
                x = torch.randn(n, 2)
                torch.testing.assert_close(compiled(x), fn(x))
            assert len(counting.graphs) == graphs


def test_negative_item_as_size_raises_as_eager():
    fn = lambda x: torch.zeros(x.sum().long().item()) + 1  # noqa: E731
    with dynacap.config.patch(**ON):
        for backend in BACKENDS:
            counting = CountingBackend(backend)
            for v in (3.0, -3.0):
                run_differential(fn, torch.full((4,), v / 4), backend=counting, reset=False, check_cache=False)


def test_zero_dim_input_item():
    fn = lambda x, k: x * k.item()  # noqa: E731
    with dynacap.config.patch(**ON):
        counting = CountingBackend("aot_eager")
        for k in (3, -2, 7):
            run_differential(fn, torch.randn(3), torch.tensor(k), backend=counting, reset=False, check_cache=False)
        assert len(counting.graphs) == 1


def test_module_with_mask_and_item():
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(5, 5)

        def forward(self, x):
            y = self.proj(x)
            return y[y > 0].sum() * y.max().item()

    head = Head()
    with dynacap.config.patch(**ON):
        for backend in BACKENDS:
            dynacap.reset()
            counting = CountingBackend(backend)
            for x in inputs():
                run_differential(head, x, backend=counting, reset=False, check_cache=False)
            assert len(counting.graphs) == 1


def test_inductor():
    fn = lambda x: (torch.zeros((x > 0).sum().item()) + x[x > 0].sum() * int((x > 0).sum())  # noqa: E731
                    + x.sum().item())
    with dynacap.config.patch(**ON):
        check_all_data(fn, "inductor", graphs=1)


def test_graph_counts_not_above_torch_compile():
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter

    programs = [SCALARS["item_times_tensor"], SCALARS["int_and_float_of_tensor"], SHAPES["mask"],
                SHAPES["nonzero"], _branch_on_item]
    for settings in ({}, ON):
        for fn in programs:
            x = next(inputs())
            with dynacap.config.patch(**settings):
                dynacap.reset()
                ours = run_differential(fn, x).graph_count
            torch._dynamo.reset()
            counter = CompileCounter()
            with torch._dynamo.config.patch(**settings):
                torch.compile(fn, backend=counter)(*clone_inputs((x,)))
            torch._dynamo.reset()
            assert ours <= counter.frame_count, (fn, settings, ours, counter.frame_count)


def _checked_count(x):
    n = (x > 0).sum().item()
    torch._check(n > 0)
    if n > 0:  # decided by the check: no break
        return x * n
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_check_holds_in_the_graph(backend):
    """What the trace assumed from ``torch._check`` is asserted when the graph runs: data that fails it
    raises eager's error (AOTAutograd alone dropped the unused check and returned a value)."""
    with dynacap.config.patch(capture_scalar_outputs=True):
        dynacap.optimize(_checked_count, backend=CountingBackend(backend), fullgraph=True)(torch.ones(3))
        dynacap.reset()
        counting = CountingBackend(backend)
        for v in (1.0, -1.0, 2.0):
            run_differential(_checked_count, torch.full((3,), v), backend=counting, reset=False, check_cache=False)
        assert len(counting.graphs) == 1
