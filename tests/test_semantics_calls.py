"""Semantics regressions (issue 7) for calls: arguments are bound as the called code expects."""
import functools

import torch

import dynacap

from differential import run_differential


def _passthrough(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@_passthrough
def _shifted(x, eps=1e-5):
    return x + eps


def test_functools_wraps_wrapper_binds_its_own_signature():
    # inspect.signature follows __wrapped__ to (x, eps); the wrapper's code takes (*args, **kwargs).
    def f(x):
        return _shifted(x, eps=0.1) * _shifted(x)

    diff = run_differential(f, torch.randn(3))
    assert diff.compiles_first == 1


def test_augmented_assignment_of_a_tensor_to_a_python_number():
    # T5's _relative_position_bucket: `buckets = 0; buckets += (pos > 0).to(torch.long) * n`.
    def f(x):
        buckets = 0
        buckets += (x > 0).to(torch.long) * 4
        total = 1.5
        total *= x
        return buckets, total

    diff = run_differential(f, torch.randn(5))
    assert diff.compiles_first == 1


def test_identity_of_a_dict_reached_two_ways():
    def f(x, d, inner):
        return d["o"][0] is d["i"], d["i"] is inner, x + 1

    inner = {"v": 1}
    run_differential(f, torch.randn(2), None, None,
                     fresh_inputs=lambda: ((torch.ones(2), {"o": [inner], "i": inner}, inner), {}))


class _Registry:
    def __init__(self):
        self.names = {"a": 1}

    def __contains__(self, key):
        return key in self.names


_REGISTRY = _Registry()
_NAMES = frozenset({"x", "y"})


def test_in_over_user_objects_and_sets_is_captured():
    def f(x, k):
        return "a" in _REGISTRY, "b" in _REGISTRY, k in _NAMES, "z" in _NAMES, x + 1

    diff = run_differential(f, torch.randn(2), "x")
    assert diff.compiles_first == 1


def test_is_compiling_is_true_while_capturing_as_under_torch_compile():
    """Libraries take their compiler path under dynacap too (the answer torch.compile gives, not eager's)."""
    import torch._dynamo

    def f(x):
        if torch.compiler.is_compiling():
            return x + 1
        return x - 1

    x = torch.zeros(2)
    torch._dynamo.reset()
    expected = torch.compile(f, backend="eager")(x)
    out = dynacap.explain(f)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert torch.equal(dynacap.optimize(f, backend="eager", fullgraph=True)(x), expected)
    assert torch.equal(f(x), x - 1)  # outside capture: False


def test_inlined_calls_bind_against_the_functions_current_defaults():
    """The signature an inlined call binds with is memoised per function: a new ``__defaults__`` or
    ``__code__`` must be seen (speed: one signature per function instead of one per call)."""
    import dynacap
    from differential import run_differential

    def g(a, b=1):
        return a + b

    def h(a, b=100):
        return a * b

    def f(x):
        return g(x)

    run_differential(f, torch.ones(2))
    g.__defaults__ = (5,)
    run_differential(f, torch.ones(2))
    g.__code__ = h.__code__
    g.__defaults__ = (7,)
    run_differential(f, torch.ones(2))
    dynacap.reset()
