"""``tensor.data``, ``Variable``, legacy typed constructors, ``x.new``, ``x.type``, ``requires_grad_`` (issue 9 item 2).

Each program runs eagerly and under dynacap (``run_differential``), then once more with
``fullgraph=True`` where it must be one graph; programs with autograd also compare gradients
and version counters after a backward.  A few rows compare graph counts with torch.compile's.
"""
import pytest
import torch

import dynacap
from differential import CountingBackend, clone_inputs, run_differential

BACKENDS = ["eager", "aot_eager"]


def check(fn, *args, backend=None, graphs=1, fullgraph=True):
    """Eager vs captured; ``graphs`` compiles; and the whole program as one graph under ``fullgraph=True``."""
    result = run_differential(fn, *args, backend=CountingBackend(backend))
    assert result.graph_count == graphs
    if fullgraph:
        dynacap.reset()
        dynacap.optimize(fn, backend=CountingBackend(backend), fullgraph=True)(*clone_inputs(args))
    return result


def with_backward(fn, make_inputs, backend, *, fullgraph=True):
    """Run ``fn`` then ``backward`` of its (summed) result, eagerly and captured: results, gradients,
    inputs after the call and their version counters must match (or both raise the same error)."""

    def run(call):
        torch.manual_seed(0)
        inputs = make_inputs()
        try:
            out = call(*inputs)
            out.sum().backward()
        except RuntimeError as e:
            return "raised", str(e).splitlines()[0], None, None
        return out.detach(), [t.grad for t in inputs if t.requires_grad], [t.detach() for t in inputs], \
            [t._version for t in inputs]

    expected = run(fn)
    backend = CountingBackend(backend)
    actual = run(dynacap.optimize(fn, backend=backend, fullgraph=fullgraph))
    assert type(expected[0]) is type(actual[0]) and (expected[:2] == actual[:2] if expected[0] == "raised" else True)
    if expected[0] != "raised":
        torch.testing.assert_close(actual[0], expected[0])
        for got, want in zip(actual[1], expected[1]):
            torch.testing.assert_close(got, want)
        for got, want in zip(actual[2], expected[2]):
            torch.testing.assert_close(got, want)
    return backend, expected, actual


# -- tensor.data ---------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_data_read_is_detached_alias(backend):
    def f(x):
        d = x.data
        return d * 2 + x, d.requires_grad, d.shape

    check(f, torch.randn(3, requires_grad=True), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_returned_shares_storage_without_grad(backend):
    x = torch.randn(3, requires_grad=True)
    out = dynacap.optimize(lambda x: x.data, backend=CountingBackend(backend), fullgraph=True)(x)
    assert not out.requires_grad and out.data_ptr() == x.data_ptr() and out is not x
    check(lambda x: x.data, torch.randn(3, requires_grad=True), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_through_data_changes_the_input(backend):
    def clip(p):
        p.data.clamp_(-0.5, 0.5)
        return p * 2

    check(clip, torch.randn(5, requires_grad=True), backend=backend)
    counting, _, _ = with_backward(clip, lambda: (torch.randn(5, requires_grad=True),), backend)
    assert len(counting.graphs) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_through_data_after_a_saved_use(backend):
    """Eager: the change through ``.data`` is not seen by autograd (no version-counter error) and
    the backward uses the changed values."""

    def f(w, x):
        y = (w * x).sum()
        w.data.add_(1)
        return y

    with_backward(f, lambda: (torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_update_through_data(backend):
    p = torch.nn.Parameter(torch.randn(4))

    def step(x):
        p.data.mul_(0.5)
        p.data[0] = 1.0
        return (p * x).sum()

    before = p.detach().clone()
    x = torch.randn(4)
    expected = (before * 0.5).index_put((torch.tensor([0]),), torch.tensor(1.0))
    backend_ = CountingBackend(backend)
    out = dynacap.optimize(step, backend=backend_, fullgraph=True)(x)
    torch.testing.assert_close(p.detach(), expected)
    torch.testing.assert_close(out, (expected * x).sum())
    assert len(backend_.graphs) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_version_counter_is_its_own(backend):
    """A backward saved before the call still works after ``x.data.add_`` in the captured code: eager's
    ``.data`` has a version counter of its own (AOTAutograd writes the change back to ``x`` itself;
    dynacap puts ``x._version`` back)."""

    def bump(x):
        x.data.add_(1)
        x.data[0] = 2.0
        return x * 2

    for call in (bump, dynacap.optimize(bump, backend=CountingBackend(backend), fullgraph=True)):
        x = torch.randn(3, requires_grad=True)
        saved = x.sin()
        call(x)
        assert x._version == 0
        saved.sum().backward()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shared", [True, False])
def test_parameter_version_counter_kept_through_data(backend, shared):
    """Weight clipping on a module's parameters (graph inputs, or ``get_attr`` when graphs are not shared)."""
    layer = torch.nn.Linear(3, 3)

    def clip(x):
        for p in (layer.weight, layer.bias):
            p.data.clamp_(-0.1, 0.1)
        return layer(x)

    with dynacap.config.patch(share_graphs_across_instances=shared):
        compiled = dynacap.optimize(clip, backend=CountingBackend(backend), fullgraph=True)
        x = torch.randn(2, 3)
        saved = layer(x)
        versions = layer.weight._version, layer.bias._version  # (initialisation wrote them in place)
        out = compiled(x)
        assert (layer.weight._version, layer.bias._version) == versions
        saved.sum().backward()
        torch.testing.assert_close(out, torch.nn.functional.linear(x, layer.weight, layer.bias))
        assert layer.weight.abs().max() <= 0.1


@pytest.mark.parametrize("backend", BACKENDS)
def test_direct_mutation_still_counts(backend):
    """``x.add_`` (not through ``.data``) bumps the version counter as in eager."""

    def f(x):
        with torch.no_grad():
            x.add_(1)
        x.data.mul_(2)
        return x * 2

    for call in (f, dynacap.optimize(f, backend=CountingBackend(backend))):
        x = torch.randn(3, requires_grad=True)
        call(x)
        assert x._version >= 1


def test_data_assignment_is_a_clean_break():
    def f(p, t):
        p.data = t * 2
        return p + 1

    result = check(f, torch.randn(3), torch.randn(4), graphs=2, fullgraph=False)
    assert result.graph_count == 2
    out = dynacap.explain(f)(torch.randn(3), torch.randn(4))
    assert any("`tensor.data = ...`" in str(r) for r in out.break_reasons)


class _MomentumTarget(torch.nn.Module):
    """BYOL/MoCo written with ``.data =``: the target follows the online network, then runs."""

    def __init__(self):
        super().__init__()
        self.online = torch.nn.Linear(4, 3)
        self.target = torch.nn.Linear(4, 3)

    def forward(self, x):
        for p_o, p_t in zip(self.online.parameters(), self.target.parameters()):
            p_t.data = p_t.data * 0.9 + p_o.data * 0.1
        return self.target(x) * self.online(x)


@pytest.mark.parametrize("backend", BACKENDS + ["inductor"])
def test_data_assignment_of_a_new_value_is_one_graph(backend):
    """``p.data = <new tensor>``: one graph; after each call and a backward, the parameters, their gradients,
    the input's gradient, the version counters (unchanged, as eager's) and ``is_leaf`` match eager."""
    torch.manual_seed(0)
    eager, captured = _MomentumTarget(), _MomentumTarget()
    captured.load_state_dict(eager.state_dict())
    counting = CountingBackend(backend)
    compiled = dynacap.optimize(captured, backend=counting, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, 4, requires_grad=True)
        xc = x.detach().clone().requires_grad_()
        versions = [p._version for p in eager.parameters()], [p._version for p in captured.parameters()]
        storages = [p.untyped_storage().data_ptr() for p in captured.target.parameters()]
        out_e, out_c = eager(x), compiled(xc)
        torch.testing.assert_close(out_c, out_e)
        out_e.sum().backward()
        out_c.sum().backward()
        torch.testing.assert_close(xc.grad, x.grad)
        for pe, pc in zip(eager.parameters(), captured.parameters()):
            torch.testing.assert_close(pc, pe)
            torch.testing.assert_close(pc.grad, pe.grad)
            assert pc.is_leaf and pc.requires_grad and type(pc) is torch.nn.Parameter
        assert ([p._version for p in eager.parameters()], [p._version for p in captured.parameters()]) == versions
        assert all(p.untyped_storage().data_ptr() != old for p, old in zip(captured.target.parameters(), storages))
    assert len(counting.graphs) == 1


def _keeps_the_new_value(p, x):
    t = x * 2
    p.data = t
    t.add_(1)  # eager: p sees this (it shares t's storage)
    return p * 1, t


def _keeps_the_old_data(p, x):
    w = p.data
    p.data = x * 2
    return w + 0, p * 1  # eager: w stays on the old storage


def _used_before(p, x):
    y = p * x  # autograd saves p: eager's backward sees the data swapped in below
    p.data = x * 3
    return y + p


def _another_parameter(p, x):
    p.data = x
    return p * 2


def _shape_change(p, x):
    p.data = torch.zeros(0)
    return p.numel()


def _dtype_change(p, x):
    p.data = p.data.double()
    return p * 2


@pytest.mark.parametrize("fn", [_keeps_the_new_value, _keeps_the_old_data, _used_before, _another_parameter,
                                _shape_change, _dtype_change], ids=lambda f: f.__name__.strip("_"))
def test_data_assignment_others_could_see_breaks_and_matches_eager(fn):
    """Where another tensor could tell ``set_`` in a graph from eager's ``.data =`` (aliases of the old or
    the new storage, a use autograd saved, an input's storage) or the metadata changes: a break, eager's result."""
    def run(call):
        torch.manual_seed(0)
        p = torch.nn.Parameter(torch.randn(3))
        x = torch.randn(3)
        out = call(p, x)
        version = p._version
        if isinstance(out, tuple) and isinstance(out[0], torch.Tensor) and out[0].requires_grad:
            out[0].sum().backward()
        return out, p.detach().clone(), p.grad, version

    expected = run(fn)
    dynacap.reset()
    actual = run(dynacap.optimize(fn, backend="eager"))
    torch.testing.assert_close(actual, expected)
    explained = dynacap.explain(fn)(torch.nn.Parameter(torch.randn(3)), torch.randn(3))
    assert any("`tensor.data = ...`" in r.reason for r in explained.break_reasons)


# -- Variable ------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_variable_is_a_detached_alias(backend):
    from torch.autograd import Variable

    def f(x):
        v = Variable(x)
        return v + 1, v.requires_grad, Variable().numel()

    check(f, torch.randn(3, requires_grad=True), backend=backend)
    x = torch.randn(3, requires_grad=True)
    v = dynacap.optimize(lambda x: Variable(x), backend=CountingBackend(backend), fullgraph=True)(x)
    assert v is not x and not v.requires_grad and v.data_ptr() == x.data_ptr()


def test_variable_requires_grad_breaks_cleanly():
    from torch.autograd import Variable

    result = check(lambda x: Variable(x, requires_grad=True) * 2, torch.randn(3), graphs=1, fullgraph=False)
    assert result.graph_count == 1
    check(lambda x: Variable(x, requires_grad=True) * 2, torch.randn(3), backend="aot_eager", fullgraph=False)


# -- legacy typed constructors -------------------------------------------------------------------

LEGACY = {
    "FloatTensor_list": lambda x: x + torch.FloatTensor([1, 2, 3, 4, 5]),
    "DoubleTensor_list": lambda x: torch.DoubleTensor([1.5, 2.5]).sum() + x,
    "LongTensor_list_truncates": lambda x: torch.LongTensor([1.7, -1.7]) + x.long()[0, :2],
    "LongTensor_sizes_filled": lambda x: torch.LongTensor(3, 4).fill_(2) * 2,
    "IntTensor_zeroed": lambda x: torch.IntTensor(2).zero_() + 1,
    "Tensor_list": lambda x: torch.Tensor([1, 2, 3, 4, 5]) + x,
    "Tensor_tuple_is_data": lambda x: torch.Tensor((4, 5)) + x[0, :2],
    "Tensor_sizes_filled": lambda x: torch.Tensor(4, 5).fill_(1) + x,
    "Tensor_Size_zeroed": lambda x: torch.Tensor(x.shape).zero_() + x,
    "Tensor_of_tensor_aliases": lambda x: torch.Tensor(x).add_(1),
    "Tensor_empty": lambda x: (torch.Tensor().shape, torch.FloatTensor().dtype, x + 1),
    "FloatTensor_device": lambda x: torch.FloatTensor([1.0], device="cpu") + x,
    "new_sizes_and_new_zeros": lambda x: x.new(4, 5).zero_() + x.new_zeros(4, 5) + x,
    "new_list": lambda x: x.new([1, 2, 3, 4, 5]) * x,
    "new_tensor": lambda x: x.new_tensor([1, 2, 3, 4, 5]) * x,
    "new_ones_full_empty": lambda x: x.new_ones(5) + x.new_full((4, 5), 3.0) + x.new_empty(4, 5).fill_(1),
    "type_dtype": lambda x: x.type(torch.float64) + 1,
    "type_name": lambda x: x.type("torch.DoubleTensor") + 1,
    "type_class": lambda x: x.type(torch.LongTensor) + 1,
    "type_same_is_self": lambda x: x.type(torch.float32),
    "type_text": lambda x: (x + 1, x.type()),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_constructor(name, backend):
    check(LEGACY[name], torch.randn(4, 5), backend=backend)


def test_legacy_constructor_wrong_dtype_raises_as_eager():
    """``torch.FloatTensor(double_tensor)`` is eager's TypeError: the call runs eagerly and raises it."""
    check(lambda x: torch.FloatTensor(x) + 1, torch.randn(3, dtype=torch.float64), graphs=0, fullgraph=False)


def test_legacy_constructor_with_symbolic_sizes():
    def f(x):
        return torch.Tensor(x.size(0), 2).fill_(3) + x

    backend = CountingBackend()
    compiled = dynacap.optimize(f, backend=backend, dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 2)
        torch.testing.assert_close(compiled(x), f(x))
    assert len(backend.graphs) == 1


def test_legacy_constructor_inductor():
    check(lambda x: torch.FloatTensor([1, 2, 3]) * x + x.new_ones(3) + x.type(torch.float64).float(),
          torch.randn(3), backend="inductor")


# -- requires_grad_ ------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_on_graph_tensor_breaks_and_matches(backend):
    """AOTAutograd would return the tensor without ``requires_grad``: it runs eagerly between two graphs."""
    check(lambda x: x.clone().requires_grad_() * 2, torch.randn(3), backend=backend, graphs=2, fullgraph=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_already_set_is_no_op(backend):
    check(lambda x: x.requires_grad_() * 2, torch.randn(3, requires_grad=True), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_false_on_a_tensor_without_grad_is_no_op(backend):
    check(lambda x: x * x.detach().clone().requires_grad_(False), torch.randn(3, requires_grad=True), backend=backend)


# -- against torch.compile -----------------------------------------------------------------------

def test_graph_counts_not_above_torch_compile():
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter

    def clip(p):
        p.data.clamp_(-0.5, 0.5)
        return p * 2

    programs = [
        (clip, torch.randn(5, requires_grad=True)),
        (LEGACY["FloatTensor_list"], torch.randn(4, 5)),
        (LEGACY["Tensor_sizes_filled"], torch.randn(4, 5)),
        (LEGACY["type_name"], torch.randn(4, 5)),
        (lambda x: torch.autograd.Variable(x) + 1, torch.randn(4, 5)),
        (lambda x: x.clone().requires_grad_() * 2, torch.randn(3)),
    ]
    for fn, x in programs:
        ours = run_differential(fn, x).graph_count
        torch._dynamo.reset()
        counter = CompileCounter()
        torch.compile(fn, backend=counter)(x.clone().requires_grad_(x.requires_grad))
        torch._dynamo.reset()
        assert ours <= counter.frame_count, (fn, ours, counter.frame_count)


# -- crawled-style modules -------------------------------------------------------------------------

class _OldRNN(torch.nn.Module):
    """Pre-0.4 style: hidden state made with Variable and a typed constructor, ``.data`` reads."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 6)
        self.out = torch.nn.Linear(6, 3)

    def forward(self, x):
        h = torch.autograd.Variable(torch.zeros(x.size(0), 6))
        steps = torch.autograd.Variable(torch.LongTensor([0, 2]))
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
        scores = self.out(h)
        return scores, scores.data.max(1)[1], steps


class _ClippedCritic(torch.nn.Module):
    """WGAN critic: weights clipped through ``.data`` in forward, a mask built with ``x.new``."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(5, 1)

    def forward(self, x):
        for p in (self.fc.weight, self.fc.bias):
            p.data.clamp_(-0.05, 0.05)
        mask = x.new(x.size()).fill_(1.0)
        mask[:, 0] = 0
        return self.fc(x * mask).mean()


class _EmaTeacher(torch.nn.Module):
    """Mean-teacher update of a copy's weights through ``.data`` (no autograd), then its forward."""

    def __init__(self):
        super().__init__()
        self.student = torch.nn.Linear(5, 5)
        self.teacher = torch.nn.Linear(5, 5)

    def forward(self, x):
        for t, s in ((self.teacher.weight, self.student.weight), (self.teacher.bias, self.student.bias)):
            t.data.mul_(0.9).add_(s.data, alpha=0.1)
        return self.teacher(x).type(torch.DoubleTensor) + self.student(x).type(dtype=torch.float64)


MODULES = {"old_rnn": (_OldRNN, (2, 3, 4)), "clipped_critic": (_ClippedCritic, (4, 5)),
           "ema_teacher": (_EmaTeacher, (3, 5))}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(MODULES))
def test_crawled_style_module(name, backend):
    import copy

    import torch._dynamo
    from torch._dynamo.testing import CompileCounter

    cls, shape = MODULES[name]
    torch.manual_seed(0)
    model, x = cls(), torch.randn(*shape)
    eager_model, captured_model = copy.deepcopy(model), copy.deepcopy(model)
    expected = eager_model(x)
    counting = CountingBackend(backend)
    actual = dynacap.optimize(captured_model, backend=counting, fullgraph=True)(x)
    from differential import assert_same

    assert_same(expected, actual)
    for (name_, p), q in zip(eager_model.state_dict().items(), captured_model.state_dict().values()):
        torch.testing.assert_close(q, p, msg=name_)
    assert len(counting.graphs) == 1
    torch._dynamo.reset()
    counter = CompileCounter()
    torch.compile(copy.deepcopy(model), backend=counter)(x)
    torch._dynamo.reset()
    assert len(counting.graphs) <= counter.frame_count
