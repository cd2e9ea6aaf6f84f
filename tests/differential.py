"""Differential testing helpers: run a program eagerly and under dynacap, compare everything.

``run_differential(fn, *args, **kwargs)`` is the workhorse.  It runs ``fn``

1. eagerly, on a fresh copy of the inputs;
2. under ``dynacap.optimize(fn, backend=CountingBackend())``, on another copy;
3. a second time under the same wrapper, on a third copy (exercises the cache);

and compares, against the eager run: the return value (nested tuples, lists,
dicts, ``torch.Size`` and tensors; exact for Python values, ``assert_close``
with matching dtype/shape/requires_grad for tensors), which returned objects
are the inputs themselves (``return x`` must hand back the caller's tensor,
not a copy), the inputs after the call (in-place tensor mutation, list/dict
mutation), text printed to ``sys.stdout`` and raised exceptions (same type
and message).  It returns a ``DiffResult`` with the backend's counts.

Copies: tensors are cloned (same dtype, strides for contiguous tensors,
requires_grad), lists/tuples/dicts are copied recursively; every other object
(modules, functions, user objects) is shared between the runs, so that guards
on object identity keep hitting the cache.
"""
from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass, field

import torch

import dynacap

_MISSING = object()


class CountingBackend:
    """A dynacap backend that records every graph it is given and runs it as is.

    ``len(backend.graphs)`` is the number of compiles; ``backend.runs`` counts
    how many times a compiled graph was executed.
    """

    def __init__(self, inner=None):
        """``inner``: a backend (name or callable) that compiles each graph; default: run ``gm.forward``."""
        self.graphs: list[torch.fx.GraphModule] = []
        self.example_inputs: list[list] = []
        self.runs = 0
        self.inner = inner

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        if self.inner is None:
            forward = gm.forward
        else:
            from dynacap.backends import lookup_backend

            forward = lookup_backend(self.inner)(gm, example_inputs)

        def run(*args):
            self.runs += 1
            return forward(*args)

        return run

    @property
    def compiles(self) -> int:
        return len(self.graphs)

    @property
    def op_count(self) -> int:
        return sum(op_count(gm) for gm in self.graphs)

    def targets(self) -> list:
        """Every call target (function, method name or module name) of every recorded graph."""
        return [n.target for gm in self.graphs for n in gm.graph.nodes
                if n.op in ("call_function", "call_method", "call_module")]

    def reset(self) -> None:
        self.graphs.clear()
        self.example_inputs.clear()
        self.runs = 0


def op_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def graph_targets(gm: torch.fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def target_names(targets) -> set[str]:
    """Readable names of graph call targets (``torch.sin`` -> "sin", "add" for operator.add...)."""
    names = set()
    for t in targets:
        names.add(t if isinstance(t, str) else getattr(t, "__name__", repr(t)))
    return names


# -- copying -------------------------------------------------------------------------------
def clone_inputs(obj, memo=None):
    """Copy tensors and plain containers (keeping aliasing between them); share everything else."""
    if memo is None:
        memo = {}
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, torch.nn.Parameter):
        result = obj  # parameters belong to modules, which are shared
    elif isinstance(obj, torch.Tensor):
        if obj._base is not None and id(obj._base) in memo:
            raise NotImplementedError("clone_inputs: views of other inputs are not supported")
        result = obj.detach().clone()
        if obj.is_contiguous():
            result = result.contiguous()
        result.requires_grad_(obj.requires_grad)
    elif type(obj) is list:
        result = []
        memo[id(obj)] = result
        result.extend(clone_inputs(x, memo) for x in obj)
    elif type(obj) is dict:
        result = {}
        memo[id(obj)] = result
        for k, v in obj.items():
            result[k] = clone_inputs(v, memo)
    elif type(obj) is tuple:
        result = tuple(clone_inputs(x, memo) for x in obj)
    else:
        result = obj
    memo[id(obj)] = result
    return result


# -- comparing -----------------------------------------------------------------------------
def assert_same(expected, actual, path: str = "result", *, rtol=None, atol=None) -> None:
    """Deep comparison: containers by type and length, tensors by metadata and values, rest exactly."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual).__name__}"
        assert type(actual) is type(expected), f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert actual.device == expected.device, f"{path}: device {actual.device} != {expected.device}"
        assert actual.requires_grad == expected.requires_grad, \
            f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}"
        torch.testing.assert_close(actual.detach(), expected.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{path}: {m}")
        return
    assert type(actual) is type(expected), \
        f"{path}: type {type(actual).__name__} != {type(expected).__name__} ({actual!r} vs {expected!r})"
    if isinstance(expected, (tuple, list)):  # includes torch.Size and named tuples
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{path}[{i}]", rtol=rtol, atol=atol)
        return
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(expected[k], actual[k], f"{path}[{k!r}]", rtol=rtol, atol=atol)
        return
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), f"{path}: {actual!r} != nan"
        return
    if actual is expected:
        return
    if type(expected).__eq__ is object.__eq__ and hasattr(expected, "__dict__") \
            and not isinstance(expected, (torch.nn.Module, type)) and not callable(expected):
        # Plain user objects (one per run): compare their attributes.
        assert_same(vars(expected), vars(actual), f"{path}.__dict__", rtol=rtol, atol=atol)
        return
    assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _children(obj, path):
    """``(item, path)`` for the items of a list, tuple or dict (nothing for other objects)."""
    if isinstance(obj, (list, tuple)):
        return [(x, f"{path}[{i}]") for i, x in enumerate(obj)]
    if isinstance(obj, dict):
        return [(x, f"{path}[{k!r}]") for k, x in obj.items()]
    return []


def _tensor_paths(obj, path, out, seen):
    """Map id(tensor) -> path for every tensor reachable through plain containers."""
    if id(obj) in seen:
        return
    if isinstance(obj, torch.Tensor):
        out.setdefault(id(obj), path)
        return
    if isinstance(obj, (list, tuple, dict)):
        seen.add(id(obj))
    for x, sub in _children(obj, path):
        _tensor_paths(x, sub, out, seen)


def _aliases(result, inputs) -> dict:
    """For each tensor path in ``result``: the path of the input it *is*, or None."""
    input_paths: dict = {}
    _tensor_paths(inputs, "inputs", input_paths, set())
    found: dict = {}

    def walk(obj, path, seen):
        if id(obj) in seen:
            return
        if isinstance(obj, torch.Tensor):
            found[path] = input_paths.get(id(obj))
            return
        if isinstance(obj, (list, tuple, dict)):
            seen = seen | {id(obj)}
        for x, sub in _children(obj, path):
            walk(x, sub, seen)

    walk(result, "result", frozenset())
    return found


def _alias_groups(result) -> list:
    """Paths of the result's tensors grouped by identity (``return y, y`` is one group of two)."""
    groups: dict = {}

    def walk(obj, path, depth=0):
        if depth > 20:
            return
        if isinstance(obj, torch.Tensor):
            groups.setdefault(id(obj), []).append(path)
        for x, sub in _children(obj, path):
            walk(x, sub, depth + 1)

    walk(result, "result")
    return sorted(g for g in groups.values() if len(g) > 1)


def _container_aliases(result, inputs) -> dict:
    """For each list/dict in ``result``: the path of the input container it *is*, or None."""
    input_paths: dict = {}

    def index(obj, path):
        if isinstance(obj, (list, dict)) and id(obj) not in input_paths:
            input_paths[id(obj)] = path
        for x, sub in _children(obj, path):
            index(x, sub)

    index(inputs, "inputs")
    found: dict = {}

    def walk(obj, path, depth=0):
        if depth > 20:
            return
        if isinstance(obj, (list, dict)):
            found[path] = input_paths.get(id(obj))
        for x, sub in _children(obj, path):
            walk(x, sub, depth + 1)

    walk(result, "result")
    return found


@dataclass
class Outcome:
    """What one run of the program did."""

    result: object = None
    exception: BaseException | None = None
    stdout: str = ""
    inputs: tuple = ()  # (args, kwargs) after the call

    def describe_exception(self) -> str:
        e = self.exception
        return "no exception" if e is None else f"{type(e).__name__}: {e}"


@dataclass
class DiffResult:
    eager: Outcome
    captured: list[Outcome] = field(default_factory=list)
    backend: CountingBackend | None = None
    #: Backend compiles after the first captured call, and after the second.
    compiles_first: int = 0
    compiles_second: int = 0

    @property
    def result(self):
        return self.captured[0].result

    @property
    def graph_count(self) -> int:
        return self.compiles_first


def run_once(fn, args, kwargs, capture_stdout: bool) -> Outcome:
    out = Outcome()
    buffer = io.StringIO()
    redirect = contextlib.redirect_stdout(buffer) if capture_stdout else contextlib.nullcontext()
    with redirect:
        try:
            out.result = fn(*args, **kwargs)
        except Exception as e:  # compared with the other run
            out.exception = e
    out.stdout = buffer.getvalue()
    out.inputs = (args, kwargs)
    return out


def compare_outcomes(eager: Outcome, captured: Outcome, label: str, *, rtol=None, atol=None,
                     check_identity: bool = True) -> None:
    if eager.exception is not None or captured.exception is not None:
        assert captured.exception is not None, \
            f"{label}: eager raised {eager.describe_exception()} but the captured run returned {captured.result!r}"
        assert eager.exception is not None, \
            f"{label}: the captured run raised {captured.describe_exception()} but eager did not"
        assert type(captured.exception) is type(eager.exception), \
            f"{label}: exception {captured.describe_exception()} != {eager.describe_exception()}"
        assert str(captured.exception) == str(eager.exception), \
            f"{label}: exception message {captured.describe_exception()} != {eager.describe_exception()}"
    else:
        assert_same(eager.result, captured.result, f"{label} result", rtol=rtol, atol=atol)
        if check_identity:
            e_alias = _aliases(eager.result, eager.inputs)
            c_alias = _aliases(captured.result, captured.inputs)
            assert c_alias == e_alias, \
                f"{label}: returned tensors that are inputs differ (eager {e_alias}, captured {c_alias})"
            e_groups, c_groups = _alias_groups(eager.result), _alias_groups(captured.result)
            assert c_groups == e_groups, \
                f"{label}: tensors returned more than once differ (eager {e_groups}, captured {c_groups})"
            e_alias = _container_aliases(eager.result, eager.inputs)
            c_alias = _container_aliases(captured.result, captured.inputs)
            assert c_alias == e_alias, \
                f"{label}: returned containers that are inputs differ (eager {e_alias}, captured {c_alias})"
    assert_same(eager.inputs, captured.inputs, f"{label} inputs after the call", rtol=rtol, atol=atol)
    assert captured.stdout == eager.stdout, f"{label}: printed {captured.stdout!r}, eager printed {eager.stdout!r}"


def run_differential(fn, *args, backend: CountingBackend | None = None, capture_stdout: bool = True,
                     check_cache: bool = True, rtol=None, atol=None, check_identity: bool = True,
                     reset: bool = True, fresh_inputs=None, **kwargs) -> DiffResult:
    """Run ``fn(*args, **kwargs)`` eagerly and twice under dynacap; assert every observable matches.

    ``check_cache``: the second captured call must not compile anything new
    (the same inputs must hit the cache).  ``fresh_inputs``: a callable
    returning ``(args, kwargs)``, called once per run instead of copying
    ``args``/``kwargs`` (for inputs such as user objects that the program
    mutates).  Returns a ``DiffResult``.
    """
    if reset:
        dynacap.reset()
    backend = backend if backend is not None else CountingBackend()
    inputs = (args, kwargs)

    def clone_inputs(inputs):  # noqa: F811 (one fresh copy per run)
        return fresh_inputs() if fresh_inputs is not None else _clone(inputs)

    e_args, e_kwargs = clone_inputs(inputs)
    eager = run_once(fn, e_args, e_kwargs, capture_stdout)

    compiled = dynacap.optimize(fn, backend=backend)
    diff = DiffResult(eager, backend=backend)
    c_args, c_kwargs = clone_inputs(inputs)
    diff.captured.append(run_once(compiled, c_args, c_kwargs, capture_stdout))
    diff.compiles_first = backend.compiles
    compare_outcomes(eager, diff.captured[0], "first captured call", rtol=rtol, atol=atol,
                     check_identity=check_identity)

    c_args, c_kwargs = clone_inputs(inputs)
    diff.captured.append(run_once(compiled, c_args, c_kwargs, capture_stdout))
    diff.compiles_second = backend.compiles
    compare_outcomes(eager, diff.captured[1], "second captured call (cache)", rtol=rtol, atol=atol,
                     check_identity=check_identity)
    if check_cache:
        assert diff.compiles_second == diff.compiles_first, (
            f"the second call with equal inputs compiled again ({diff.compiles_first} -> "
            f"{diff.compiles_second} graphs): the cache was missed")
    return diff


def explain_captured(fn, *args, **kwargs):
    """``dynacap.explain(fn)`` on a copy of the inputs; its result must equal eager on another copy."""
    e_args, e_kwargs = clone_inputs((args, kwargs))
    expected = fn(*e_args, **e_kwargs)
    x_args, x_kwargs = clone_inputs((args, kwargs))
    out = dynacap.explain(fn)(*x_args, **x_kwargs)
    assert_same(expected, out.result, "explain result")
    return out


def assert_fully_captured(fn, *args, min_ops: int = 1, **kwargs):
    """The whole program is one graph with no break (checked with ``dynacap.explain``)."""
    out = explain_captured(fn, *args, **kwargs)
    assert out.graph_break_count == 0, f"unexpected graph breaks:\n{out}"
    assert out.graph_count == 1, f"expected exactly one graph:\n{out}"
    assert out.op_count >= min_ops, f"expected at least {min_ops} ops in the graph:\n{out}"
    return out


_clone = clone_inputs
