"""Guard soundness: whenever an assumption of a capture stops holding, the next call recompiles
(counted with a ``CountingBackend``) and gives the eager answer; while assumptions hold, the
cache is hit.  Also the cache size limit, ``config.patch`` and the ``recompiles`` log channel.
"""
from __future__ import annotations

import logging
import warnings

import pytest
import torch
import torch.nn as nn

import dynacap
from differential import CountingBackend, assert_same, clone_inputs


def t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


class Probe:
    """``fn`` captured with a counting backend; each ``check`` compares one call with eager."""

    def __init__(self, fn, inner_backend=None):
        self.fn = fn
        self.backend = CountingBackend(inner_backend)
        self.captured = dynacap.optimize(fn, backend=self.backend)

    def check(self, *args, **kwargs):
        e_args, e_kwargs = clone_inputs((args, kwargs))
        c_args, c_kwargs = clone_inputs((args, kwargs))
        expected = self.fn(*e_args, **e_kwargs)
        actual = self.captured(*c_args, **c_kwargs)
        assert_same(expected, actual)
        assert_same((e_args, e_kwargs), (c_args, c_kwargs), "inputs after the call")
        return actual

    @property
    def compiles(self):
        return self.backend.compiles


def assert_recompiles(probe: Probe, args, change, new_args=None):
    """Call, call again (cache hit), ``change()`` the world, call: one more compile, eager answer."""
    probe.check(*args)
    first = probe.compiles
    assert first >= 1, "nothing was captured"
    probe.check(*args)
    assert probe.compiles == first, "an unchanged second call must hit the cache"
    change()
    probe.check(*(new_args if new_args is not None else args))
    assert probe.compiles == first + 1, f"expected a recompile after the change ({first} -> {probe.compiles})"
    return probe


# ---------------------------------------------------------------------------------------------------
# Globals.
GAIN = 2.0
BIAS_T = torch.tensor([1.0, 2.0, 3.0])
USE_TANH = True


def act(x):
    return torch.tanh(x)


def reads_globals(x):
    y = x * GAIN + BIAS_T
    if USE_TANH:
        y = act(y)
    return y


@pytest.fixture
def restore_globals():
    saved = dict(GAIN=GAIN, BIAS_T=BIAS_T, USE_TANH=USE_TANH, act=act)
    yield
    globals().update(saved)


def test_global_constant_change(restore_globals):
    def change():
        global GAIN
        GAIN = -0.5

    assert_recompiles(Probe(reads_globals), (t(3),), change)


def test_global_flag_change(restore_globals):
    def change():
        global USE_TANH
        USE_TANH = False

    assert_recompiles(Probe(reads_globals), (t(3),), change)


def test_global_function_swapped(restore_globals):
    def change():
        global act
        act = torch.sigmoid

    assert_recompiles(Probe(reads_globals), (t(3),), change)


def test_global_tensor_new_values_same_metadata_no_recompile(restore_globals):
    """A global tensor is a graph input: new values are read on every call without recompiling."""
    global BIAS_T
    probe = Probe(reads_globals)
    probe.check(t(3))
    BIAS_T = torch.tensor([-7.0, 0.0, 7.0])
    probe.check(t(3))
    BIAS_T.mul_(3)  # in place, too
    probe.check(t(3))
    assert probe.compiles == 1


def test_global_tensor_shape_change(restore_globals):
    def change():
        global BIAS_T
        BIAS_T = torch.tensor([5.0])

    assert_recompiles(Probe(reads_globals), (t(3),), change)


def test_shadowing_a_builtin_with_a_global():
    """A global named like a builtin (`len`) defined after the capture: the NOT_PRESENT guard fails."""
    namespace = {}
    exec("def g(x, items):\n    return x * len(items)\n", namespace)
    g = namespace["g"]

    def change():
        namespace["len"] = lambda items: 10

    assert_recompiles(Probe(g), (t(2), [1, 2]), change)


# ---------------------------------------------------------------------------------------------------
# Closures.
def make_closure(scale, offset):
    def body(x):
        return x * scale + offset

    def set_scale(value):
        nonlocal scale
        scale = value

    def set_offset(value):
        nonlocal offset
        offset = value

    return body, set_scale, set_offset


def test_closure_cell_constant_change():
    body, set_scale, _ = make_closure(3.0, torch.ones(3))
    assert_recompiles(Probe(body), (t(3),), lambda: set_scale(-1.5))


def test_closure_cell_tensor_shape_change():
    body, _, set_offset = make_closure(3.0, torch.ones(3))
    assert_recompiles(Probe(body), (t(3),), lambda: set_offset(torch.ones(1) * 4))


def test_closure_cell_tensor_new_values_no_recompile():
    body, _, set_offset = make_closure(3.0, torch.ones(3))
    probe = Probe(body)
    probe.check(t(3))
    set_offset(torch.full((3,), -2.0))
    probe.check(t(3))
    assert probe.compiles == 1


def test_closure_of_inlined_helper_changes():
    body, set_scale, _ = make_closure(2.0, torch.zeros(3))

    def caller(x):
        return body(x) + body(x * 2)

    assert_recompiles(Probe(caller), (t(3),), lambda: set_scale(5.0))


# ---------------------------------------------------------------------------------------------------
# Module attributes and state.
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)
        self.scale = 2.0
        self.mode = "sum"

    def forward(self, x):
        y = self.lin(x) * self.scale
        if self.training:
            y = y + 100.0
        y = self.drop(y)
        return y.sum(-1) if self.mode == "sum" else y.mean(-1)


def module_probe(model, inner_backend=None):
    backend = CountingBackend(inner_backend)
    opt = dynacap.optimize(model, backend=backend)

    class P(Probe):
        def __init__(self):
            self.fn = model
            self.backend = backend
            self.captured = opt

    return P()


def test_module_float_attribute_change():
    model = Scaled().eval()
    assert_recompiles(module_probe(model), (t(2, 4),), lambda: setattr(model, "scale", 0.25))


def test_module_string_attribute_change():
    model = Scaled().eval()
    assert_recompiles(module_probe(model), (t(2, 4),), lambda: setattr(model, "mode", "mean"))


def test_module_train_to_eval():
    model = Scaled().eval()
    model.train()
    model.drop.p = 0.0  # deterministic in training mode, but `self.training` still changes the program
    assert_recompiles(module_probe(model), (t(2, 4),), model.eval)


def test_submodule_training_flag_alone():
    """Only the Dropout child is switched: its own `training` flag must be guarded."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.9)).eval()

    def run(x):
        return model(x) * 2

    probe = Probe(run)
    probe.check(t(2, 4))
    model[1].train()
    torch.manual_seed(0)
    expected = run(t(2, 4))
    torch.manual_seed(0)
    assert_same(expected, probe.captured(t(2, 4)))
    assert probe.compiles == 2


def test_submodule_replaced():
    # Instances share graphs: a same-shaped replacement hits the entry (its parameters are inputs).
    model = Scaled().eval()
    probe = module_probe(model)
    probe.check(t(2, 4))
    model.lin = nn.Linear(4, 4)
    probe.check(t(2, 4))
    assert probe.compiles == 1
    model.lin = nn.Linear(4, 4, bias=False)  # another structure: recompiles
    probe.check(t(2, 4))
    assert probe.compiles == 2


def test_submodule_replaced_when_instances_are_specialized():
    model = Scaled().eval()
    with dynacap.config.patch(share_graphs_across_instances=False):
        assert_recompiles(module_probe(model), (t(2, 4),), lambda: setattr(model, "lin", nn.Linear(4, 4)))


def test_instances_of_a_class_share_one_graph():
    backend = CountingBackend()
    x = t(2, 4)
    for _ in range(20):
        model = Scaled().eval()
        assert_same(model(x), dynacap.optimize(model, backend=backend)(x))
    assert backend.compiles == 1


def test_module_list_appended():
    layers = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])

    def run(x):
        for layer in layers:
            x = torch.relu(layer(x))
        return x

    assert_recompiles(Probe(run), (t(2, 3),), lambda: layers.append(nn.Linear(3, 3)))


def test_sequential_appended():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())

    def run(x):
        return model(x).sum(-1)

    assert_recompiles(Probe(run), (t(2, 3),), lambda: model.append(nn.Linear(3, 2)))


def test_parameter_updated_in_place_no_recompile():
    model = Scaled().eval()
    probe = module_probe(model)
    probe.check(t(2, 4))
    with torch.no_grad():
        model.lin.weight.mul_(-3.0)
        model.lin.bias.add_(1.0)
    probe.check(t(2, 4))
    assert probe.compiles == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_parameter_replaced(backend):
    """A new Parameter on a built-in layer: backends may have captured the old one (AOTAutograd does)."""
    model = Scaled().eval()
    probe = module_probe(model, backend)

    def change():
        model.lin.weight = nn.Parameter(torch.ones(4, 4))

    with torch.no_grad():
        probe.check(t(2, 4))
        change()  # parameters are graph inputs: the new one is used without a recompile
        probe.check(t(2, 4))
        assert probe.compiles == 1
        with dynacap.config.patch(share_graphs_across_instances=False):
            dynacap.reset()
            assert_recompiles(module_probe(model, backend), (t(2, 4),), change)


class Cfg:
    def __init__(self):
        self.alpha = 0.5
        self.inner = type("Inner", (), {})()
        self.inner.depth = 2


def test_nested_object_attribute_change():
    cfg = Cfg()

    def run(x):
        for _ in range(cfg.inner.depth):
            x = x * cfg.alpha + 1
        return x

    def change():
        cfg.inner.depth = 4

    assert_recompiles(Probe(run), (t(3),), change)


# ---------------------------------------------------------------------------------------------------
# Tensor metadata, constants and containers given as arguments.
def tensor_fn(x):
    return torch.sin(x) * 2 + 1


@pytest.mark.parametrize("first, second", [
    pytest.param(t(3), t(3, dtype=torch.float64), id="dtype"),
    pytest.param(t(3), t(5), id="shape"),
    pytest.param(t(3, 2), t(3, 2, 1), id="rank"),
    pytest.param(t(3), t(3).requires_grad_(), id="requires_grad"),
    pytest.param(t(3, 4), t(4, 3).T, id="stride"),
    pytest.param(t(3), nn.Parameter(t(3)), id="tensor_type"),
])
def test_tensor_metadata_change(first, second):
    probe = Probe(tensor_fn)
    assert_recompiles(probe, (first,), lambda: None, (second,))
    if second.requires_grad:
        out = probe.captured(second)
        assert out.requires_grad and out.grad_fn is not None


def test_grad_mode_change():
    w = t(3).requires_grad_()

    def fn(x):
        return x * w

    probe = Probe(fn)
    probe.check(t(3))
    with torch.no_grad():
        out = probe.check(t(3))
    assert not out.requires_grad
    assert probe.compiles == 2


@pytest.mark.parametrize("first, second", [
    pytest.param(3, 4, id="int"),
    pytest.param(0.5, 1.5, id="float"),
    pytest.param(True, False, id="bool"),
    pytest.param("relu", "tanh", id="str"),
    pytest.param(None, 2.0, id="none_to_float"),
    pytest.param(2, 2.0, id="int_to_equal_float"),
    pytest.param(torch.float32, torch.float64, id="dtype_arg"),
])
def test_constant_argument_change(first, second):
    def fn(x, c):
        if c is None:
            return x - 1
        if isinstance(c, str):
            return torch.relu(x) if c == "relu" else torch.tanh(x)
        if isinstance(c, torch.dtype):
            return x.to(c) * 2
        y = x * c
        return (y, c * 3, type(c).__name__)

    assert_recompiles(Probe(fn), (t(3), first), lambda: None, (t(3), second))


def test_list_argument_length_change():
    def fn(xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total / len(xs)

    assert_recompiles(Probe(fn), ([t(2), t(2, seed=1)],), lambda: None, ([t(2), t(2, seed=1), t(2, seed=2)],))


def test_list_argument_item_constant_change():
    def fn(x, sizes):
        return x.reshape(sizes[0], sizes[1]) * sizes[1]

    assert_recompiles(Probe(fn), (t(6), [2, 3]), lambda: None, (t(6), [3, 2]))


def test_tuple_argument_item_type_change():
    def fn(x, pair):
        a, b = pair
        return x * a + b

    assert_recompiles(Probe(fn), (t(3), (1, 2)), lambda: None, (t(3), (1, t(3))))


def test_dict_argument_keys_and_values_change():
    def fn(x, opts):
        y = x
        for name, value in opts.items():
            y = y * value if name.startswith("mul") else y + value
        return y

    probe = Probe(fn)
    assert_recompiles(probe, (t(3), {"mul": 2.0, "add": 1.0}), lambda: None, (t(3), {"add": 1.0, "mul": 2.0}))
    compiles = probe.compiles
    probe.check(t(3), {"mul": 3.0, "add": 1.0})
    assert probe.compiles == compiles + 1
    probe.check(t(3), {"mul": 3.0, "add": 1.0, "mul2": 0.5})
    assert probe.compiles == compiles + 2


def test_keyword_argument_change():
    def fn(x, *, scale=1.0, shift=None):
        y = x * scale
        return y if shift is None else y + shift

    probe = Probe(fn)
    probe.check(t(3))
    probe.check(t(3), scale=2.0)
    probe.check(t(3), shift=t(3))
    probe.check(t(3), scale=2.0, shift=t(3))
    assert probe.compiles == 4
    probe.check(t(3), scale=1.0)  # equal to the default: the first entry
    assert probe.compiles == 4


def test_user_object_argument_identity():
    class Opts:
        def __init__(self, k):
            self.k = k

    def fn(x, opts):
        return x * opts.k

    probe = Probe(fn)
    a, b = Opts(2.0), Opts(5.0)
    assert_recompiles(probe, (t(3), a), lambda: None, (t(3), b))
    a.k = 7.0
    probe.check(t(3), a)
    assert probe.compiles == 3


# ---------------------------------------------------------------------------------------------------
# Methods and properties resolved through a class, globals in containers and other modules.
class Runner:
    def run(self, x):
        return x * 2

    @property
    def scale(self):
        return 2.0


class Doubler(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.helper(x) * 2

    def helper(self, x):
        return self.lin(x)


def test_instance_shadows_method():
    runner = Runner()

    def fn(x):
        return runner.run(x) * runner.scale

    assert_recompiles(Probe(fn), (t(3),), lambda: setattr(runner, "run", lambda x: x * 3))


@pytest.mark.parametrize("name, replacement", [
    pytest.param("run", lambda self, x: x * 5, id="method"),
    pytest.param("scale", property(lambda self: 7.0), id="property"),
])
def test_class_attribute_patched(name, replacement):
    cls = type("RunnerCopy", (Runner,), {})
    runner = cls()

    def fn(x):
        return runner.run(x) * runner.scale

    assert_recompiles(Probe(fn), (t(3),), lambda: setattr(cls, name, replacement))


def test_module_method_patched_on_class():
    cls = type("DoublerCopy", (Doubler,), {})
    model = cls()
    assert_recompiles(module_probe(model), (t(3),), lambda: setattr(cls, "helper", lambda self, x: self.lin(x) + 1))


@pytest.mark.parametrize("where", ["instance", "class"])
def test_inlined_module_forward_patched(where):
    cls = type("DoublerCopy", (Doubler,), {})
    model = cls()

    def fn(x):
        return model(x) + 1

    def change():
        if where == "instance":
            model.forward = lambda x: model.lin(x) * 4
        else:
            cls.forward = lambda self, x: self.lin(x) * 8

    assert_recompiles(Probe(fn), (t(3),), change)


ACTIVATION_TABLE = {"f": torch.tanh}
SIZE_LIST = [1, 2]


def reads_global_containers(x):
    return ACTIVATION_TABLE["f"](x) * sum(SIZE_LIST)


@pytest.mark.parametrize("change", [
    pytest.param(lambda: ACTIVATION_TABLE.__setitem__("f", torch.sigmoid), id="dict_value"),
    pytest.param(lambda: ACTIVATION_TABLE.__setitem__("g", torch.relu), id="dict_new_key"),
    pytest.param(lambda: SIZE_LIST.append(5), id="list_append"),
    pytest.param(lambda: SIZE_LIST.__setitem__(0, 10), id="list_item"),
])
def test_global_container_mutated(change):
    saved = (dict(ACTIVATION_TABLE), list(SIZE_LIST))
    try:
        assert_recompiles(Probe(reads_global_containers), (t(3),), change)
    finally:
        ACTIVATION_TABLE.clear()
        ACTIVATION_TABLE.update(saved[0])
        SIZE_LIST[:] = saved[1]


def test_global_of_another_module_and_module_attribute():
    import types

    namespace = {"torch": torch, "K": 3.0}
    exec("def helper(x):\n    return x * K\n", namespace)
    helper = namespace["helper"]
    settings = types.ModuleType("settings")
    settings.SCALE = 2.0

    def fn(x):
        return helper(x) + settings.SCALE

    probe = Probe(fn)
    assert_recompiles(probe, (t(3),), lambda: namespace.__setitem__("K", -1.0))
    probe.check(t(3))
    compiles = probe.compiles
    settings.SCALE = 5.0
    probe.check(t(3))
    assert probe.compiles == compiles + 1


def test_module_container_attributes_mutated():
    class WithConfig(nn.Module):
        def __init__(self):
            super().__init__()
            self.dims = [1, 2]
            self.cfg = {"act": "relu"}
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x) * sum(self.dims)
            return torch.relu(y) if self.cfg["act"] == "relu" else torch.tanh(y)

    model = WithConfig()
    probe = module_probe(model)
    assert_recompiles(probe, (t(3),), lambda: model.dims.append(3))
    compiles = probe.compiles
    model.cfg["act"] = "tanh"
    probe.check(t(3))
    assert probe.compiles == compiles + 1


def helper_with_default(x, weight=2.0):
    return x * weight


def test_inlined_function_defaults_change():
    def fn(x):
        return helper_with_default(x)

    saved = helper_with_default.__defaults__
    try:
        assert_recompiles(Probe(fn), (t(3),), lambda: setattr(helper_with_default, "__defaults__", (-4.0,)))
    finally:
        helper_with_default.__defaults__ = saved


BRACES = "{arch}-{n}"


def reads_brace_string(x):
    return x * len(BRACES) + len(BRACES.format(arch="x", n=1))


def test_string_constant_with_braces_correct():
    probe = Probe(reads_brace_string)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe.check(t(3))
        probe.check(t(3))


def test_string_constant_with_braces_is_captured():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no internal-error warning
        out = dynacap.explain(reads_brace_string)(t(3))
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)


def test_inf_and_nan_constants_hit_the_cache():
    def fn(x, bound):
        return torch.clamp(x, max=bound) if bound == bound else x

    for bound in (float("inf"), float("nan")):
        dynacap.reset()
        probe = Probe(fn)
        probe.check(t(3), bound)
        probe.check(t(3), bound)
        assert probe.compiles == 1 or bound != bound
    probe = Probe(fn)
    assert_recompiles(probe, (t(3), float("inf")), lambda: None, (t(3), 0.0))


# ---------------------------------------------------------------------------------------------------
# Cache size limit and config.
def per_constant(x, k):
    return x * k + k


def test_cache_size_limit_warns_once_then_runs_eagerly():
    probe = Probe(per_constant)
    with dynacap.config.patch(cache_size_limit=2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for k in range(6):
                probe.check(t(3), k)
            for k in range(6):  # old entries still hit; new constants run eagerly, correctly
                probe.check(t(3), k + 0.5)
        limit_warnings = [w for w in caught if "cache_size_limit" in str(w.message)]
        assert len(limit_warnings) == 1, [str(w.message) for w in caught]
        assert "per_constant" in str(limit_warnings[0].message)
        assert probe.compiles == 2
        runs = probe.backend.runs
        probe.check(t(3), 17)
        assert probe.backend.runs == runs, "past the limit the function runs eagerly"
        assert probe.compiles == 2


def test_cache_size_limit_is_per_code_object():
    def other(x, k):
        return x - k

    a, b = Probe(per_constant), Probe(other)
    with dynacap.config.patch(cache_size_limit=2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3):
            a.check(t(3), k)
        for k in range(2):
            b.check(t(3), k)
    assert (a.compiles, b.compiles) == (2, 2)


def test_reset_clears_the_limit():
    probe = Probe(per_constant)
    with dynacap.config.patch(cache_size_limit=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe.check(t(3), 1)
        probe.check(t(3), 2)
        assert probe.compiles == 1
        dynacap.reset()
        probe.check(t(3), 2)
        assert probe.compiles == 2


def test_config_patch_context_manager_and_decorator():
    default = dynacap.config.cache_size_limit
    with dynacap.config.patch(cache_size_limit=3, suppress_errors=False):
        assert dynacap.config.cache_size_limit == 3
        assert dynacap.config.suppress_errors is False
        with dynacap.config.patch(cache_size_limit=5):
            assert dynacap.config.cache_size_limit == 5
        assert dynacap.config.cache_size_limit == 3
    assert dynacap.config.cache_size_limit == default

    @dynacap.config.patch(cache_size_limit=1)
    def limited():
        return dynacap.config.cache_size_limit

    assert limited() == 1
    assert limited() == 1  # reusable
    assert dynacap.config.cache_size_limit == default

    with pytest.raises(AttributeError, match="no_such_setting"):
        dynacap.config.patch(no_such_setting=1)

    try:
        with dynacap.config.patch(cache_size_limit=9):
            raise KeyError("boom")
    except KeyError:
        pass
    assert dynacap.config.cache_size_limit == default


def test_config_patch_applies_to_capture():
    """inline_depth_limit=0: no user function can be inlined, results still equal eager."""
    def helper(x):
        return x.cos()

    def fn(x):
        return helper(x) + 1

    with dynacap.config.patch(inline_depth_limit=0):
        out = dynacap.explain(fn)(t(3))
        Probe(fn).check(t(3))
    assert out.graph_break_count >= 1
    out = dynacap.explain(fn)(t(3))
    assert (out.graph_count, out.graph_break_count) == (1, 0)


# ---------------------------------------------------------------------------------------------------
# The recompiles log channel.
def test_recompiles_log_names_the_failing_guard(caplog):
    probe = Probe(tensor_fn)
    caplog.set_level(logging.DEBUG, logger="dynacap.recompiles")
    probe.check(t(3))
    assert not [r for r in caplog.records if r.name == "dynacap.recompiles"], "no recompile yet"
    probe.check(t(3, dtype=torch.float64))
    records = [r.getMessage() for r in caplog.records if r.name == "dynacap.recompiles"]
    assert len(records) == 1, records
    assert "tensor_fn" in records[0]
    assert "L['x']" in records[0] and "dtype" in records[0], records[0]


def test_recompiles_log_names_a_global_guard(caplog, restore_globals):
    global GAIN
    probe = Probe(reads_globals)
    caplog.set_level(logging.DEBUG, logger="dynacap.recompiles")
    probe.check(t(3))
    GAIN = 4.0
    probe.check(t(3))
    records = [r.getMessage() for r in caplog.records if r.name == "dynacap.recompiles"]
    assert records and "GAIN" in records[0], records


def test_recompiles_log_silent_when_disabled(caplog):
    caplog.set_level(logging.WARNING, logger="dynacap.recompiles")
    probe = Probe(tensor_fn)
    probe.check(t(3))
    probe.check(t(4))
    assert not [r for r in caplog.records if r.name == "dynacap.recompiles"]
    assert probe.compiles == 2


def mutates_first_reads_second(x, y):
    x.add_(1)
    return y * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_aliased_tensor_arguments_are_guarded(backend):
    f = dynacap.optimize(mutates_first_reads_second, backend=backend)
    for aliased in (True, False, True):
        a, b = torch.ones(3), torch.ones(3)
        e1, e2 = torch.ones(3), torch.ones(3)
        expected = mutates_first_reads_second(e1, e1 if aliased else e2)
        got = f(a, a if aliased else b)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(a, e1)


# -- guard only what was read ------------------------------------------------------------------------
BIG = list(range(30000))
PAIR = (3, [1, 2])


def test_an_item_of_a_big_list_guards_that_item_only():
    BIG[:] = range(30000)

    def f(x):
        return x + BIG[7]

    x = t(3)
    guards = dynacap.explain(f)(x).guards
    assert len(guards) < 50, len(guards)
    assert any("len(G['BIG']) > 7" in g for g in guards), guards
    probe = Probe(f)
    probe.check(x)
    BIG.append(0)  # the list grew: what the graph read is unchanged, no recompile
    probe.check(x)
    assert probe.backend.compiles == 1
    BIG[7] = 100  # the item read changed: recompile
    probe.check(x)
    assert probe.backend.compiles == 2
    BIG[:] = range(5)  # shorter, item 7 gone: IndexError as eager
    with pytest.raises(IndexError):
        f(x)
    with pytest.raises(IndexError):
        probe.captured(x)


def test_a_negative_index_or_len_guards_the_length():
    items = [1, 2, 3]

    def f(x):
        return x * items[-1] + len(items)

    probe = Probe(f)
    x = t(2)
    probe.check(x)
    items.append(5)  # items[-1] and len() both change
    probe.check(x)
    assert probe.backend.compiles == 2


def test_reading_every_item_guards_every_item():
    items = [1.0, 2.0]

    def f(x):
        for v in items:
            x = x + v
        return x

    probe = Probe(f)
    x = t(2)
    probe.check(x)
    items[1] = 5.0
    probe.check(x)
    items.append(1.0)
    probe.check(x)
    assert probe.backend.compiles == 3


def test_a_nested_item_of_a_tuple_is_guarded_through_its_path():
    def f(x):
        return x + PAIR[1][0]

    probe = Probe(f)
    x = t(2)
    probe.check(x)
    PAIR[1][0] = 7
    probe.check(x)
    assert probe.backend.compiles == 2
    PAIR[1][0] = 1


def test_hasattr_on_a_module_is_guarded():
    class Maybe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            if hasattr(self, "extra"):
                return self.lin(x) + self.extra
            return self.lin(x)

    model = Maybe()
    assert dynacap.explain(model)(t(1, 2)).graph_break_count == 0
    probe = module_probe(model)
    probe.check(t(1, 2))
    model.extra = 5.0  # now present: recompile, and the eager answer
    probe.check(t(1, 2))
    assert probe.compiles == 2
    other = Maybe()  # another instance without it: the first entry again
    assert_same(other(t(1, 2)), dynacap.optimize(other, backend=probe.backend)(t(1, 2)))
    assert probe.compiles == 2


class ClassCfg:
    table = {"k": 1.0}
    scale = 2.0


def test_class_attributes_are_guarded():
    def f(x):
        return x * ClassCfg.table["k"] + ClassCfg.scale + type(x).__name__.__len__()

    probe = Probe(f)
    x = t(2)
    probe.check(x)
    ClassCfg.table["k"] = 5.0  # changed in place: the captured constant would be stale
    probe.check(x)
    ClassCfg.scale = 7.0  # rebound
    probe.check(x)
    assert probe.compiles == 3
    ClassCfg.table["k"], ClassCfg.scale = 1.0, 2.0


@pytest.mark.parametrize("python_guards", [False, True])
def test_globals_of_two_modules_whose_names_read_alike_are_guarded_apart(python_guards, monkeypatch):
    """Functions of modules ``a.b`` and ``a_b`` (their names alike once made identifiers) read a global of
    one name and value: each module's global is guarded on its own, so changing the second recompiles
    (both guards once had one text, and one of them was dropped as a duplicate: a stale result)."""
    import types

    if python_guards:
        monkeypatch.setenv("DYNACAP_PYTHON_GUARDS", "1")

    def module(name):
        m = types.ModuleType(name)
        exec("def get():\n    return X\n", m.__dict__)
        m.X = 1.0
        return m

    first, second = module("a.b"), module("a_b")

    def f(t):
        return t + first.get() + second.get()

    opt = dynacap.optimize(f, backend="eager")
    t = torch.zeros(1)
    assert opt(t).item() == f(t).item() == 2.0
    second.X = 5.0
    assert opt(t).item() == f(t).item() == 6.0
    first.X = 7.0
    assert opt(t).item() == f(t).item() == 12.0

