"""Dynamic shapes: automatic dynamic, ``dynamic=True/False``, marks, symbolic guards (issue: dynamic shapes).

Every test is differential: each call's result is compared with eager, then
compiles are counted with ``CountingBackend`` (one compile per graph made).
"""
import logging
import warnings

import pytest
import torch

import dynacap
from tests.differential import CountingBackend, assert_same, run_differential

SIZES = [3, 4, 5, 6, 7, 9, 12, 16, 21, 33, 64]
BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def _fresh():
    dynacap.reset()
    yield
    dynacap.reset()


def sweep(fn, make_args, sizes=SIZES, *, backend="eager", **options):
    """Call ``optimize(fn)`` once per size, compare each result with eager; return the compile count."""
    counting = CountingBackend(backend)
    opt = dynacap.optimize(fn, backend=counting, **options)
    for n in sizes:
        args = make_args(n)
        torch.manual_seed(0)
        expected = fn(*args)
        torch.manual_seed(0)
        assert_same(expected, opt(*args), path=f"size {n}", rtol=1e-5, atol=1e-5)
    return counting


# -- automatic dynamic --------------------------------------------------------------------------
def elementwise(x):
    return torch.relu(x) * 2 + 1


def matmul(a, b):
    return a @ b


def reshape_transpose(x):
    return x.reshape(x.shape[0], 2, -1).transpose(1, 2).contiguous()


def cat_arith(x, y):
    z = torch.cat([x, y], dim=0)
    return z.view(x.size(0) + y.size(0), -1).sum(1), z.shape[0] * 2


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / (q.size(-1) ** 0.5)
    return torch.softmax(scores, dim=-1) @ v


CASES = {
    "elementwise": (elementwise, lambda n: (torch.randn(n, 8),)),
    "matmul": (matmul, lambda n: (torch.randn(n, 8), torch.randn(8, 5))),
    "reshape_transpose": (reshape_transpose, lambda n: (torch.randn(n, 12),)),
    "cat_arith": (cat_arith, lambda n: (torch.randn(n, 4), torch.randn(n + 1, 4))),
    "attention": (attention, lambda n: (torch.randn(2, n, 8), torch.randn(2, n, 8), torch.randn(2, n, 8))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_size_sweep_compiles_at_most_twice(case, backend):
    fn, make = CASES[case]
    counting = sweep(fn, make, backend=backend)
    assert counting.compiles <= 2, counting.compiles
    assert any(isinstance(x, torch.SymInt) or (isinstance(x, torch.Tensor) and
                                               any(isinstance(d, torch.SymInt) for d in x.shape))
               for x in counting.example_inputs[-1]), "the second compile is symbolic"


def test_transformer_encoder_layer_over_six_sequence_lengths():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
    counting = CountingBackend("aot_eager")
    opt = dynacap.optimize(layer, backend=counting)
    with torch.no_grad():
        for n in (3, 5, 8, 11, 17, 30):
            x = torch.randn(2, n, 16)
            assert_same(layer(x), opt(x), path=f"seq {n}", rtol=1e-4, atol=1e-5)
    assert counting.compiles <= 2, counting.compiles


def test_a_third_size_hits_the_symbolic_entry():
    counting = sweep(elementwise, lambda n: (torch.randn(n, 3),), sizes=[4, 5, 6, 7, 4, 5])
    assert counting.compiles == 2
    assert counting.runs == 6


def test_only_the_dim_that_changed_is_symbolic():
    counting = sweep(elementwise, lambda n: (torch.randn(n, 3),), sizes=[4, 5])
    fake = counting.example_inputs[-1][0]
    assert isinstance(fake.shape[0], torch.SymInt) and fake.shape[1] == 3


def test_a_rank_change_makes_every_dim_symbolic():
    counting = sweep(lambda x: x * 2, lambda n: (torch.randn(*([3] * n)),), sizes=[2, 3, 3])
    assert counting.compiles == 2
    assert all(isinstance(d, torch.SymInt) for d in counting.example_inputs[-1][0].shape)


def test_sizes_0_and_1_stay_specialized():
    counting = sweep(elementwise, lambda n: (torch.randn(n, 3),), sizes=[4, 5, 1, 0, 7])
    # 4 static, 5 symbolic (for every size >= 2), 1 and 0 each their own entry.
    assert counting.compiles == 4
    for example in counting.example_inputs[2:]:
        assert example[0].shape[0] in (0, 1)


def test_int_arguments_become_symbolic_on_change():
    def f(x, n):
        return x.reshape(n, -1) * n, n * 2 + 1

    counting = sweep(f, lambda n: (torch.randn(n, 4), n), sizes=[2, 3, 4, 5, 8])
    assert counting.compiles == 2
    assert any(isinstance(x, torch.SymInt) for x in counting.example_inputs[-1])
    result = dynacap.optimize(f, backend="eager")(torch.randn(6, 4), 6)[1]
    assert type(result) is int and result == 13


def test_an_int_that_python_needs_exactly_is_specialized_soundly():
    def f(x, n):
        out = x
        for _ in range(n):  # range() needs the int: specialized, so each n is its own entry
            out = out + 1
        return out

    counting = sweep(f, lambda n: (torch.randn(3), n), sizes=[2, 3, 4, 3, 2])
    assert counting.compiles == 3


def test_floats_are_specialized_never_symbolic():
    def f(x, s):
        return x * s

    counting = sweep(f, lambda n: (torch.randn(3), n / 4), sizes=[1, 2, 3])
    assert counting.compiles == 3
    assert not any(isinstance(x, torch.SymFloat) for ex in counting.example_inputs for x in ex)


def test_parameters_keep_static_shapes():
    lin = torch.nn.Linear(4, 3)
    counting = sweep(lambda x: lin(x), lambda n: (torch.randn(n, 4),), sizes=[2, 3, 5])
    assert counting.compiles == 2


# -- dynamic=True / False, marks --------------------------------------------------------------------
def test_dynamic_true_compiles_once():
    counting = sweep(elementwise, lambda n: (torch.randn(n, n + 1),), dynamic=True)
    assert counting.compiles == 1


def test_dynamic_false_compiles_once_per_size():
    sizes = [3, 4, 5, 6]
    counting = sweep(elementwise, lambda n: (torch.randn(n, 3),), sizes=sizes, dynamic=False)
    assert counting.compiles == len(sizes)


def _marked(n, mark=dynacap.mark_dynamic, **kwargs):
    x = torch.randn(n, 3)
    mark(x, 0, **kwargs)
    return (x,)


def test_mark_dynamic_compiles_once():
    counting = sweep(elementwise, _marked, sizes=[3, 4, 5, 6, 9])
    assert counting.compiles == 1


def test_torch_mark_dynamic_is_honoured():
    import torch._dynamo

    counting = sweep(elementwise, lambda n: _marked(n, torch._dynamo.mark_dynamic), sizes=[3, 4, 5, 6])
    assert counting.compiles == 1


def test_maybe_mark_dynamic_compiles_once():
    counting = sweep(elementwise, lambda n: _marked(n, dynacap.maybe_mark_dynamic), sizes=[3, 4, 5, 6])
    assert counting.compiles == 1


def test_mark_static_wins_over_dynamic_true():
    counting = sweep(elementwise, lambda n: _marked(n, dynacap.mark_static), sizes=[3, 4, 5], dynamic=True)
    assert counting.compiles == 3


def test_mark_dynamic_range_is_part_of_the_guard():
    counting = sweep(elementwise, lambda n: _marked(n, min=2, max=10), sizes=[3, 4, 10])
    assert counting.compiles == 1
    opt = dynacap.optimize(elementwise, backend=counting)
    assert_same(elementwise(torch.ones(11, 3)), opt(torch.ones(11, 3)))  # unmarked: another entry
    assert counting.compiles == 2
    first = dynacap.explain(dynacap.optimize(elementwise, backend="eager"))(*_marked(5, min=2, max=10))
    assert any("<= 10" in g for g in first.guards), first.guards
    with pytest.raises(dynacap.ConstraintViolation, match="outside the range"):
        opt(*_marked(11, min=2, max=10))  # the user said at most 10


def test_mark_dynamic_then_specialized_raises():
    def f(x):
        if x.size(0) == 5:  # specializes the dim the user marked dynamic
            return x + 1
        return x - 1

    x = torch.randn(5, 3)
    dynacap.mark_dynamic(x, 0)
    with pytest.raises(dynacap.ConstraintViolation, match="specialized"):
        dynacap.optimize(f, backend="eager")(x)


def test_mark_dynamic_rejects_a_dim_out_of_range():
    with pytest.raises(IndexError):
        dynacap.mark_dynamic(torch.randn(3), 1)


# -- symbolic values in the graph --------------------------------------------------------------------------
def test_branch_on_a_size_is_a_guard_not_a_break():
    def f(x):
        if x.size(0) > 8:
            return x * 2
        return x - 1

    counting = sweep(f, lambda n: (torch.randn(n, 2),), sizes=[8, 16, 32, 4, 12, 5])
    # static 8; then `x.size(0) > 8` symbolic (16, 32, 12); then `<= 8` (4, 5).
    assert counting.compiles == 3
    out = dynacap.explain(dynacap.optimize(f, backend="eager", dynamic=True))(torch.randn(16, 2))
    assert out.graph_break_count == 0
    assert any("9 <= L['x'].size()[0]" in g for g in out.guards), out.guards


def test_size_queries_and_arithmetic_stay_symbolic():
    def f(x):
        b, c = x.shape
        n = x.numel()
        return x.view(b * c).sum(), b * c == n, x.size(-2) // 2, len(x), x.new_zeros(b + 1).shape

    counting = sweep(f, lambda n: (torch.randn(n, 3),), sizes=[4, 5, 6, 7], dynamic=True)
    assert counting.compiles == 1
    out = dynacap.optimize(f, backend="eager", dynamic=True)(torch.randn(9, 3))
    assert type(out[2]) is int and type(out[3]) is int and type(out[4]) is torch.Size


def test_expand_and_zeros_with_symbolic_sizes():
    def f(x, y):
        z = torch.zeros(x.size(0), y.size(1))
        return x.expand(x.size(0), y.size(1)) + z + y.sum(0)

    counting = sweep(f, lambda n: (torch.randn(n, 1), torch.randn(4, n + 2)), sizes=[3, 4, 5, 6], dynamic=True)
    assert counting.compiles == 1


def test_broadcasting_relation_is_guarded_soundly():
    def f(x, y):
        return x + y

    opt = dynacap.optimize(f, backend="eager", dynamic=True)
    for a, b in [(4, 4), (5, 5)]:
        x, y = torch.randn(a), torch.randn(b)
        assert_same(f(x, y), opt(x, y))
    with pytest.raises(RuntimeError) as eager_error:
        f(torch.randn(4), torch.randn(6))
    with pytest.raises(RuntimeError) as captured_error:
        opt(torch.randn(4), torch.randn(6))
    assert str(captured_error.value) == str(eager_error.value)
    x, y = torch.randn(1), torch.randn(9)
    assert_same(f(x, y), opt(x, y))
    x, y = torch.randn(9), torch.randn(1)
    assert_same(f(x, y), opt(x, y))


def test_symbolic_values_stored_by_side_effects():
    class Holder:
        pass

    holder = Holder()
    seen = []

    def f(x):
        holder.rows = x.size(0)
        seen.append(x.shape[0] * 2)
        return x + 1

    opt = dynacap.optimize(f, backend="eager", dynamic=True)
    for n in (3, 7):
        opt(torch.randn(n, 2))
        assert holder.rows == n and type(holder.rows) is int
    assert seen == [6, 14]


def test_a_graph_break_with_symbolic_sizes_resumes():
    def f(x):
        y = x * x.size(0)
        print("break")
        return y.view(-1) + x.shape[0]

    counting = sweep(f, lambda n: (torch.randn(n, 2),), sizes=[3, 4, 5, 6], dynamic=True)
    assert counting.compiles == 2  # one graph before the break and one after, for every size


# -- guards, logs, cache limit --------------------------------------------------------------------------
def test_explain_lists_symbolic_guards():
    out = dynacap.explain(dynacap.optimize(cat_arith, backend="eager", dynamic=True))(torch.randn(4, 2),
                                                                                         torch.randn(5, 2))
    shape_guards = [g for g in out.guards if g.startswith("SYMBOLIC_SHAPE")]
    assert any("L['y'].size()[1] == L['x'].size()[1]" in g for g in shape_guards), out.guards
    assert any(g.startswith("TENSOR_MATCH") and "[s" in g for g in out.guards), out.guards


def test_recompile_log_names_the_symbolic_guard_once_per_recompile(caplog):
    def f(x):
        if x.size(0) > 8:
            return x * 2
        return x - 1

    opt = dynacap.optimize(f, backend="eager", dynamic=True)
    with caplog.at_level(logging.DEBUG, logger="dynacap.recompiles"):
        opt(torch.randn(16))
        opt(torch.randn(17))
        opt(torch.randn(4))
    lines = [r.getMessage() for r in caplog.records if r.name == "dynacap.recompiles"]
    assert len(lines) == 1, lines
    assert "9 <= L['x'].size()[0]" in lines[0] and "= 4" in lines[0], lines


def test_cache_limit_warning_names_the_guard_and_the_fix():
    opt = dynacap.optimize(elementwise, backend="eager", dynamic=False)
    with dynacap.config.patch(cache_size_limit=2), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 4, 5, 6):
            assert_same(elementwise(torch.ones(n)), opt(torch.ones(n)))
    messages = [str(w.message) for w in caught if "cache_size_limit" in str(w.message)]
    assert len(messages) == 1, messages
    assert "size (5,) != (4,)" in messages[0] and "mark_dynamic" in messages[0], messages[0]


def test_dynamic_entry_guard_rejects_a_wrong_stride():
    counting = sweep(lambda x: x.sum(1), lambda n: (torch.randn(n, 4),), sizes=[3, 4], backend="eager")
    opt = dynacap.optimize(lambda x: x.sum(1), backend=counting)
    x = torch.randn(4, 6)[:, :4]  # stride (6, 1): the entry assumed (4, 1)
    assert_same(x.sum(1), opt(x))


def test_inductor_compiles_a_symbolic_graph_once_for_five_sizes():
    def f(x):
        return torch.softmax(x * 2, dim=-1).sum(0)

    counting = sweep(f, lambda n: (torch.randn(n, 6),), sizes=[3, 5, 8, 13, 21], backend="inductor", dynamic=True)
    assert counting.compiles == 1


def test_slices_and_shape_arithmetic_stay_symbolic():
    def f(x, n):
        head = x[:, : x.size(1) - 1]
        out_shape = x.shape[:-1] + (2, -1)
        return head[:n].sum(), x.view(out_shape), torch.Size([x.size(0)]) + x.shape[1:]

    counting = sweep(f, lambda n: (torch.randn(n, 6), n - 1), sizes=[3, 4, 5, 6, 7, 9])
    assert counting.compiles == 2


def test_the_code_after_a_break_starts_symbolic_where_the_frame_was():
    def f(x):
        shape = x.shape
        y = x * 2
        print("break")  # the resume function receives y and shape, symbolic in the frame's graph
        return y.reshape(shape[0], -1) + shape[1]

    counting = sweep(f, lambda n: (torch.randn(n, 4),), sizes=[3, 4, 5, 6, 7])
    # the frame: static 3, then symbolic; after the break: static 3, then symbolic from the start.
    assert counting.compiles == 4, counting.compiles


@pytest.mark.transformers
def test_a_decoder_over_several_sequence_lengths():
    from tests.transformers_models import build

    model, _ = build("gpt2")
    model.eval()
    counting = CountingBackend("eager")
    opt = dynacap.optimize(model, backend=counting)
    compiles = []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cache-limit warnings of transformers' own helpers
        for n in (8, 9, 12, 16, 5, 21):
            ids = torch.randint(0, 99, (2, n))
            assert_same(model(input_ids=ids).logits, opt(input_ids=ids).logits, rtol=1e-4, atol=1e-5)
            compiles.append(counting.compiles)
    assert compiles[-1] == compiles[3], compiles  # lengths after the fourth compile nothing new


def test_bools_in_size_arithmetic_are_ints():
    def f(x, k):
        return x.shape[0] != k, x.shape[0] + k, x.size(0) * True

    opt = dynacap.optimize(f, backend="eager", dynamic=True)
    for n in (3, 1, 5):
        x = torch.randn(n, 2)
        for k in (True, False, 2):
            assert opt(x, k) == f(x, k)


def test_an_input_first_an_int_then_a_tensor():
    """Automatic dynamic keeps one record per input source: the kind of input may change between calls
    (fuzz seed 7000061: an internal error when a method's argument was an int, then a tensor)."""
    def add(t, v):
        return t + v

    run_differential(add, torch.ones(2), 3)
    run_differential(add, torch.ones(2), torch.ones(2), reset=False)
    run_differential(add, torch.ones(2), 5, reset=False)
    run_differential(add, torch.ones(2), torch.ones(3, 2), reset=False)
