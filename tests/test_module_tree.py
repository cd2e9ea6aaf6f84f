"""A module's tree inside captured code: ``parameters()``, ``children()``, ``named_modules()``..., ParameterList
iteration, the truth value of a module, static and class methods reached through ``self``.  Differential
(eager vs captured), then one graph where torch.compile has one too.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dynacap
from differential import assert_fully_captured, run_differential


class Tree(nn.Module):
    def __init__(self, shared=False):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.block = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3, bias=False))
        self.b = self.a if shared else nn.Linear(3, 3)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        penalty = sum(p.pow(2).sum() for p in self.parameters())
        names = [n for n, _ in self.named_parameters()]
        for child in self.children():
            if not isinstance(child, nn.Sequential):
                x = child(x)
        kinds = [type(m).__name__ for _, m in self.named_modules()]
        buffers = [b * 1 for b in self.buffers()]
        return x * penalty + buffers[0], names, kinds, [n for n, _ in self.named_children()]


@pytest.mark.parametrize("shared", [False, True])
def test_tree_methods_walk_the_modules_as_eager(shared):
    model = Tree(shared)
    x = torch.randn(2, 3)
    run_differential(model, x)
    assert_fully_captured(model, x)


def test_tree_of_another_instance_of_the_class_reuses_the_graph_only_if_the_sharing_matches():
    from differential import CountingBackend

    backend = CountingBackend()
    fn = dynacap.optimize(lambda m, x: m(x)[0], backend=backend)
    x = torch.randn(2, 3)
    for model in (Tree(), Tree(), Tree(shared=True)):
        torch.testing.assert_close(fn(model, x), model(x)[0])
    assert len(backend.graphs) == 2  # the shared tree has fewer parameters: a graph of its own


def test_parameter_list_iteration_and_length():
    class Scales(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList([nn.Parameter(torch.randn(3)) for _ in range(3)])

        def forward(self, x):
            for w in self.ws:
                x = x * w
            return x + len(self.ws) if self.ws else x

    run_differential(Scales(), torch.randn(3))
    assert_fully_captured(Scales(), torch.randn(3))


def test_truth_of_modules_and_methods_through_self():
    class Net(nn.Module):
        def __init__(self, with_norm):
            super().__init__()
            self.norm = nn.LayerNorm(3) if with_norm else None
            self.layers = nn.ModuleList()
            self.fc = nn.Linear(3, 3)

        @staticmethod
        def act(t):
            return torch.relu(t)

        @classmethod
        def gain(cls, t):
            return t * len(cls.__name__)

        def forward(self, x):
            if self.norm:
                x = self.norm(x)
            if self.layers:
                x = x * 100
            if self.fc:
                x = self.fc(x)
            return self.gain(self.act(x))

    for with_norm in (True, False):
        run_differential(Net(with_norm), torch.randn(2, 3))
        assert_fully_captured(Net(with_norm), torch.randn(2, 3))


def test_weight_clipping_through_parameters_and_data():
    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)

        def forward(self, x):
            for p in self.parameters():
                p.data.clamp_(-0.01, 0.01)
            return self.fc(x)

    torch.manual_seed(0)
    eager, captured = Critic(), Critic()
    captured.load_state_dict(eager.state_dict())
    x = torch.randn(4, 3)
    torch.testing.assert_close(dynacap.optimize(captured)(x), eager(x))
    for e, c in zip(eager.parameters(), captured.parameters()):
        torch.testing.assert_close(c, e)
        assert c.abs().max() <= 0.01


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_sequential_made_in_forward_of_frame_and_new_layers(backend):
    """``nn.Sequential(self.fc, nn.ReLU())`` in forward: one graph; returned, it is a new container each call
    holding the module's own child."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            seq = nn.Sequential(self.fc, nn.ReLU(), nn.Tanh())
            return seq(x), seq[1:](x), len(seq), seq

    net = Net()
    compiled = dynacap.optimize(net, backend=backend)
    x = torch.randn(2, 3)
    first, second = compiled(x), compiled(x)
    expected = net(x)
    for got in (first, second):
        torch.testing.assert_close(got[0], expected[0])
        torch.testing.assert_close(got[1], expected[1])
        assert got[2] == 3 and type(got[3]) is nn.Sequential and got[3][0] is net.fc
        assert [type(m) for m in got[3]] == [nn.Linear, nn.ReLU, nn.Tanh]
    assert first[3] is not second[3]
    explained = dynacap.explain(Net())(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
