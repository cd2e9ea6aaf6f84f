"""``dynacap.export``: a whole program as a real ``torch.export.ExportedProgram`` (issue 13, items 1-2).

Differential: the exported ``.module()`` against eager on several inputs,
the program saved and loaded, dynamic ``Dim``s run at other sizes, breaks
named at their file:line, and the op lists of small torch.nn/timm-like
models against ``torch.export.export``'s.
"""
import contextlib
import copy
import inspect
import io

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import dynacap
from dynacap.export import ExportError, capture_pre_autograd_graph, export
from tests.differential import assert_same


@pytest.fixture(autouse=True)
def _fresh():
    dynacap.reset()
    yield
    dynacap.reset()


class ConvBnLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.linear = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        return self.linear(torch.relu(self.bn(self.conv(x))).flatten(1))


def ops(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def module_stacks(ep) -> list:
    return [(n.name, n.meta["nn_module_stack"]) for n in ep.graph.nodes if n.op == "call_function"]


def model():
    torch.manual_seed(0)
    return ConvBnLinear().eval()


def test_conv_bn_linear_is_an_exported_program_equal_to_eager():
    m = model()
    ep = export(m, (torch.randn(2, 3, 8, 8),))
    assert isinstance(ep, torch.export.ExportedProgram)
    assert ops(ep.graph_module) == ["aten.conv2d.default", "aten.batch_norm.default", "aten.relu.default",
                                    "aten.flatten.using_ints", "aten.linear.default"]
    assert [s.target for s in ep.graph_signature.input_specs][:2] == ["conv.weight", "conv.bias"]
    assert set(ep.state_dict) == set(m.state_dict())
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(2, 3, 8, 8)
        assert_same(m(x), ep.module()(x))


def test_every_operation_has_string_module_stack_and_user_stack_trace():
    ep = export(model(), (torch.randn(2, 3, 8, 8),))
    by_name = {}
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        stack = node.meta["nn_module_stack"]
        assert all(isinstance(fqn, str) and isinstance(ty, str) for fqn, ty in stack.values()), stack
        assert __file__ in node.meta["stack_trace"]
        by_name[node.name] = stack
    assert list(by_name["conv2d"].values())[-1] == ("conv", "torch.nn.modules.conv.Conv2d")
    assert list(by_name["relu"].values()) == [("", f"{__name__}.ConvBnLinear")]
    source = {n.name: n.meta["source_fn_stack"][-1][1] for n in ep.graph.nodes if n.op == "call_function"}
    assert source["linear"] is nn.Linear and source["conv2d"] is nn.Conv2d


def test_save_load_round_trip():
    m = model()
    x = torch.randn(2, 3, 8, 8)
    buffer = io.BytesIO()
    torch.export.save(export(m, (x,)), buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    assert_same(m(x), loaded.module()(x))


def test_dynamic_batch_dim_runs_other_batch_sizes_and_static_one_refuses_them():
    m = model()
    example = torch.randn(2, 3, 8, 8)
    ep = export(m, (example,), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
    assert ep.example_inputs[0][0] is example and not example.__dict__  # the user's tensor, unmarked
    (symbol, vr), = ep.range_constraints.items()
    assert (int(vr.lower), int(vr.upper)) == (0, 64)
    for batch in (3, 7, 16, 64):
        x = torch.randn(batch, 3, 8, 8)
        assert_same(m(x), ep.module()(x), path=f"batch {batch}")
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    x = torch.randn(5, 3, 8, 8)
    assert_same(m(x), torch.export.load(buffer).module()(x))
    static = export(m, (torch.randn(2, 3, 8, 8),))
    with pytest.raises(Exception):
        static.module()(torch.randn(3, 3, 8, 8))


def test_dynamic_dim_the_code_specializes_raises():
    def f(x):
        return x.reshape(4, -1)  # the batch must be 4 for this view: specialized

    with pytest.raises(ExportError):
        export(f, (torch.randn(4, 3),), dynamic_shapes=({0: Dim("n")},))


def data_dependent(x):
    y = x.sin()
    if y.sum() > 0:  # BREAK-1
        return y + 1
    return y - 1


def two_breaks(x):
    a = x.cos()
    if a.sum() > 0:  # BREAK-A
        a = a + 1
    if a.max() > 100:  # BREAK-B
        a = a * 2
    return a


def _line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def test_data_dependent_branch_raises_naming_file_and_line():
    with pytest.raises(ExportError) as info:
        export(data_dependent, (torch.randn(3),))
    assert isinstance(info.value, dynacap.Unsupported)
    assert f"{__file__}:{_line(data_dependent, 'BREAK-1')}" in str(info.value)


def test_every_break_is_named():
    with pytest.raises(ExportError) as info:
        export(two_breaks, (torch.randn(3),))
    where = [r.location() for r in info.value.break_reasons]
    assert where == [f"{__file__}:{_line(two_breaks, 'BREAK-A')}", f"{__file__}:{_line(two_breaks, 'BREAK-B')}"]
    assert "2 graph breaks" in str(info.value)


SCALE = torch.tensor([2.0, 3.0, 4.0])


def structured(x, pair, *, bias=None, k=2):
    a, b = pair
    out = {"sum": x * SCALE + a, "k": k, "prod": (b * k, x)}
    if bias is not None:
        out["sum"] = out["sum"] + bias
    return out


def test_function_with_nested_inputs_kwargs_constants_and_structured_output():
    args = (torch.randn(3), (torch.randn(3), torch.randn(3)))
    kwargs = {"bias": torch.randn(3)}
    ep = export(structured, args, kwargs)
    kinds = {s.kind.name for s in ep.graph_signature.input_specs}
    assert "CONSTANT_TENSOR" in kinds  # SCALE, a global tensor, is lifted
    for seed in range(3):
        torch.manual_seed(seed)
        a = (torch.randn(3), (torch.randn(3), torch.randn(3)))
        kw = {"bias": torch.randn(3)}
        assert_same(structured(*a, **kw), ep.module()(*a, **kw), path=f"seed {seed}")


def test_training_mode_batch_norm_updates_buffers_as_eager():
    torch.manual_seed(0)
    m = ConvBnLinear().train()
    twin = copy.deepcopy(m)
    x = torch.randn(4, 3, 8, 8)
    ep = export(copy.deepcopy(m), (x,))
    assert "aten.add_.Tensor" in ops(ep.graph_module)
    gm = ep.module()
    gm.load_state_dict(twin.state_dict())
    for seed in range(2):
        torch.manual_seed(seed)
        x = torch.randn(4, 3, 8, 8)
        assert_same(twin(x), gm(x), rtol=1e-5, atol=1e-5)
    assert_same(dict(twin.named_buffers()), dict(gm.named_buffers()), rtol=1e-5, atol=1e-5)


def test_capture_pre_autograd_graph_is_an_aten_graph_module():
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    x = torch.randn(3, 4)
    gm = capture_pre_autograd_graph(m, (x,))
    assert isinstance(gm, torch.fx.GraphModule)
    assert ops(gm).count("aten.linear.default") == 2
    assert_same(m(x), gm(x))


# -- five torch.nn / timm-like models: the same op lists as torch.export.export ----------------------
class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.drop, self.fc2 = nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


class BasicBlock(nn.Module):
    """ResNet's basic block."""

    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + x)


class MobileBlock(nn.Module):
    """A MobileNetV3-like inverted residual with squeeze-excite."""

    def __init__(self, c=8):
        super().__init__()
        self.expand = nn.Conv2d(c, 2 * c, 1)
        self.dw = nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c)
        self.se_reduce, self.se_expand = nn.Conv2d(2 * c, 4, 1), nn.Conv2d(4, 2 * c, 1)
        self.project = nn.Conv2d(2 * c, c, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        y = F.hardswish(self.dw(F.hardswish(self.expand(x))))
        s = torch.sigmoid(self.se_expand(F.relu(self.se_reduce(self.pool(y)))))
        return x + self.project(y * s)


class VitBlock(nn.Module):
    """A timm-like ViT: patch embedding, one pre-norm attention block, a head."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.norm1, self.qkv, self.proj = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.norm2, self.mlp = nn.LayerNorm(dim), Mlp.__new__(Mlp)
        nn.Module.__init__(self.mlp)
        self.mlp.fc1, self.mlp.act, self.mlp.drop, self.mlp.fc2 = (nn.Linear(dim, 32), nn.GELU(), nn.Dropout(0.0),
                                                                   nn.Linear(32, dim))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        x = x + self.proj((attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, c))
        x = x + self.mlp(self.norm2(x))
        return self.head(x[:, 0])


class ConvNeXtBlock(nn.Module):
    """timm's ConvNeXt block: depthwise conv, channels-last LayerNorm, MLP, layer scale."""

    def __init__(self, c=8):
        super().__init__()
        self.dwconv = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 1e-1))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


MODELS = {
    "mlp": (Mlp, (4, 16)),
    "resnet_block": (BasicBlock, (2, 8, 8, 8)),
    "mobilenet_block": (MobileBlock, (2, 8, 8, 8)),
    "vit": (VitBlock, (2, 3, 16, 16)),
    "convnext_block": (ConvNeXtBlock, (2, 8, 8, 8)),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_models_have_torch_export_op_lists_and_eager_results(name):
    cls, shape = MODELS[name]
    torch.manual_seed(0)
    m = cls().eval()
    x = torch.randn(*shape)
    ours = export(m, (x,))
    theirs = torch.export.export(m, (x,))
    assert ops(ours.graph_module) == ops(theirs.graph_module)
    assert [s.target for s in ours.graph_signature.input_specs] == \
        [s.target for s in theirs.graph_signature.input_specs]
    assert module_stacks(ours) == module_stacks(theirs)
    for seed in range(2):
        torch.manual_seed(seed)
        x = torch.randn(*shape)
        assert_same(m(x), ours.module()(x), rtol=1e-5, atol=1e-6)


def test_a_lowering_failure_is_named_at_the_user_line_of_its_node(monkeypatch):
    """make_fx failing on a node (here: made to fail on the relu) is reported at the node's stack_trace."""
    from dynacap.export import lower as lowering

    class Refuses(lowering._LoweringInterpreter):
        def call_function(self, target, args, kwargs):
            if target is torch.relu:
                raise RuntimeError("Could not guard on data-dependent expression Eq(u0, 1)")
            return super().call_function(target, args, kwargs)

    monkeypatch.setattr(lowering, "_LoweringInterpreter", Refuses)
    with pytest.raises(ExportError) as info:
        export(model(), (torch.randn(2, 3, 8, 8),))
    forward_line = inspect.getsourcelines(ConvBnLinear.forward)[1] + 1
    (reason,) = info.value.break_reasons
    assert reason.location() == f"{__file__}:{forward_line}"
    assert "lowering `" in reason.reason and "depends on tensor data" in reason.reason


def test_export_leaves_no_cache_entry_holding_the_model():
    import gc
    import weakref

    m = model()
    program = export(m, (torch.randn(2, 3, 8, 8),))
    alive = weakref.ref(m)
    del m
    gc.collect()
    assert alive() is None
    assert "conv.weight" in program.state_dict  # the program keeps what it needs


class Stacked(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layers = nn.Sequential(BasicBlock(), BasicBlock())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.layers(self.stem(x)).mean((2, 3)))


def test_module_stacks_and_call_graph_are_torch_exports_and_unflatten_rebuilds_the_model():
    torch.manual_seed(0)
    m = Stacked().eval()
    x = torch.randn(2, 3, 8, 8)
    ours, theirs = export(m, (x,)), torch.export.export(m, (x,))

    assert module_stacks(ours) == module_stacks(theirs)
    assert [e.fqn for e in ours.module_call_graph] == [e.fqn for e in theirs.module_call_graph]
    rebuilt = torch.export.unflatten(ours)
    assert_same(m(x), rebuilt(x))


class Holder:
    def __init__(self, t):
        self.t = t


def reads_a_holder(x, holder):
    return x + holder.t


def test_a_tensor_inside_an_unflattenable_argument_is_refused_not_baked_in():
    with pytest.raises(ExportError, match="held by a Holder argument"):
        export(reads_a_holder, (torch.randn(3), Holder(torch.randn(3))))


def _printing_steps(count: int) -> list:
    """``count`` functions, each one a break (a ``print``) at a line of its own."""
    namespace: dict = {}
    source = "".join(f"def step{i}(x):\n    print('step')\n    return x + 1\n" for i in range(count))
    exec(compile(source, "<steps>", "exec"), namespace)
    return [namespace[f"step{i}"] for i in range(count)]


STEPS = _printing_steps(40)


def many_breaks(x):
    for step in STEPS:
        x = step(x)
    return x


def test_a_run_with_many_breaks_stops_capturing_and_says_so():
    from dynacap.export.trace import MAX_BREAKS

    with contextlib.redirect_stdout(io.StringIO()) as printed, pytest.raises(ExportError) as info:
        export(many_breaks, (torch.randn(3),))
    assert len(info.value.break_reasons) == MAX_BREAKS
    assert f"capture stopped after {MAX_BREAKS} breaks" in str(info.value)
    assert printed.getvalue().count("step") == 40  # the run itself completes
