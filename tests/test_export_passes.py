"""torch.export's post-trace passes on ``dynacap.export`` programs (issue 13, item 3).

Each test compares the program with ``torch.export.export``'s for the same
module (signature, higher-order ops, range constraints, refused inputs) and
runs ``.module()`` against eager.
"""
import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import dynacap
from dynacap.export import export
from tests.differential import assert_same


@pytest.fixture(autouse=True)
def _fresh():
    dynacap.reset()
    yield
    dynacap.reset()


class Regions(nn.Module):
    """no_grad and autocast blocks, a tensor made in forward, a non-persistent buffer, nested inputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 2.0), persistent=False)
        self.register_buffer("offset", torch.zeros(4))

    def forward(self, x, pair, *, k):
        y = self.lin(x)
        with torch.no_grad():
            z = y * 2
        w = z + torch.tensor([1.0, 2.0, 3.0, 4.0])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            v = self.lin(w)
        return v.float() * self.scale + pair[0] + k + self.offset


def regions_args():
    return (torch.randn(2, 4), (torch.randn(4), torch.randn(4))), {"k": torch.randn(4)}


def specs(ep):
    return [(s.kind.name, s.arg.name, s.target, s.persistent) for s in ep.graph_signature.input_specs]


def hops(ep):
    return [n.target.name() for n in ep.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator)]


def test_signature_names_and_kinds_are_torch_exports():
    torch.manual_seed(0)
    m = Regions()
    args, kwargs = regions_args()
    ours, theirs = export(m, args, kwargs), torch.export.export(m, args, kwargs)
    assert specs(ours) == specs(theirs)
    assert ("CONSTANT_TENSOR", "c_lifted_tensor_0", "lifted_tensor_0", None) in specs(ours)
    assert ("BUFFER", "b_scale", "scale", False) in specs(ours)
    assert "scale" not in ours.state_dict and "scale" in ours.constants
    assert [s.arg.name for s in ours.graph_signature.output_specs] == \
        [s.arg.name for s in theirs.graph_signature.output_specs]


def test_grad_and_autocast_regions_are_higher_order_ops():
    torch.manual_seed(0)
    m = Regions()
    args, kwargs = regions_args()
    ours, theirs = export(m, args, kwargs), torch.export.export(m, args, kwargs)
    assert hops(ours) == hops(theirs) == ["wrap_with_set_grad_enabled", "wrap_with_autocast"]
    assert not any(n.target in (torch._C._set_grad_enabled, torch.amp.autocast_mode._enter_autocast)
                   for n in ours.graph.nodes)
    for seed in range(3):
        torch.manual_seed(seed)
        args, kwargs = regions_args()
        expected = m(*args, **kwargs)
        got = ours.module()(*args, **kwargs)
        assert_same(expected, got)
        assert got.requires_grad == expected.requires_grad


def test_state_keeps_requires_grad():
    m = Regions()
    args, kwargs = regions_args()
    ep = export(m, args, kwargs)
    vals = {n.name: n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder"}
    assert vals["p_lin_weight"].requires_grad and not vals["b_offset"].requires_grad
    assert ep.state_dict["lin.weight"] is m.lin.weight


def checked(x):
    torch._check(x.shape[0] >= 4)
    return x.reshape(-1, 2) * 2


def branch_on_size(x):
    if x.shape[0] > 4:
        return x + 1
    return x - 1


def related(x, y):
    return x.reshape(-1, 2) * 2, x + y


class Wrap(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def refuses(program, *args) -> bool:
    try:
        program.module()(*args)
    except Exception:
        return True
    return False


@pytest.mark.parametrize("fn", [checked, branch_on_size])
def test_ranges_the_code_relies_on_are_checked_as_torch_export_does(fn):
    x = torch.randn(6, 2)
    auto = {"x": {0: Dim.AUTO}}
    ours = export(fn, (x,), dynamic_shapes=auto)
    theirs = torch.export.export(Wrap(fn), (x,), dynamic_shapes={"args": ({0: Dim.AUTO},)})
    assert [(int(v.lower), str(v.upper)) for v in ours.range_constraints.values()] == \
        [(int(v.lower), str(v.upper)) for v in theirs.range_constraints.values()]
    x8 = torch.randn(8, 2)
    assert_same(fn(x8), ours.module()(x8))
    assert refuses(ours, torch.randn(3, 2)) and refuses(theirs, torch.randn(3, 2))
    with pytest.raises(dynacap.Unsupported, match="specialized"):
        export(fn, (x,), dynamic_shapes={"x": {0: Dim("n")}})  # a Dim promises every size


def test_relations_between_auto_dims_refuse_other_inputs():
    auto = {"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}}
    ep = export(related, (torch.randn(6), torch.randn(6)), dynamic_shapes=auto)
    a, b = torch.randn(10), torch.randn(10)
    assert_same(related(a, b), ep.module()(a, b))
    assert refuses(ep, torch.randn(7), torch.randn(7))  # x.size(0) % 2 == 0
    assert refuses(ep, torch.randn(8), torch.randn(10))  # y.size(0) == x.size(0)
