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


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.fc(x)) + 1


def _hooked(log: list):
    """A child with two pre-hooks (one with kwargs) and two forward hooks that log, change inputs and
    results: eager's order is pre-hooks by registration, the forward, then hooks by registration."""
    net = Hooked()

    def scale_input(module, args):
        log.append(("pre", type(module).__name__, len(args)))
        return args[0] * 2

    def shift_input(module, args, kwargs):
        log.append(("pre_kw", sorted(kwargs)))
        return (args[0] - 1,), kwargs

    def observe(module, args, output):
        log.append(("post", args[0].shape[-1]))

    def negate(module, args, kwargs, output):
        log.append(("post_kw",))
        return -output

    net.fc.register_forward_pre_hook(scale_input)
    net.fc.register_forward_pre_hook(shift_input, with_kwargs=True)
    net.fc.register_forward_hook(observe)
    net.fc.register_forward_hook(negate, with_kwargs=True)
    net.act.register_forward_hook(lambda module, args, output: output * 3)
    return net


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_forward_hooks_of_children_run_in_eagers_order(backend):
    torch.manual_seed(0)
    eager_log, captured_log = [], []
    eager, captured = _hooked(eager_log), _hooked(captured_log)
    captured.load_state_dict(eager.state_dict())
    compiled = dynacap.optimize(captured, backend=backend)
    for _ in range(2):
        x = torch.randn(2, 3)
        torch.testing.assert_close(compiled(x), eager(x))
    assert captured_log == eager_log and len(eager_log) == 8
    explained = dynacap.explain(_hooked([]))(torch.randn(2, 3))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


def test_a_hook_removed_or_added_after_capture_is_seen():
    torch.manual_seed(0)
    net = Hooked()
    compiled = dynacap.optimize(net)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), net(x))
    handle = net.fc.register_forward_hook(lambda module, args, output: output * 0)
    torch.testing.assert_close(compiled(x), net(x))
    torch.testing.assert_close(compiled(x), torch.ones(2, 3))
    handle.remove()
    torch.testing.assert_close(compiled(x), net(x))
    pre = net.act.register_forward_pre_hook(lambda module, args: (args[0] + 5,))
    torch.testing.assert_close(compiled(x), net(x))
    pre.remove()
    torch.testing.assert_close(compiled(x), net(x))


def test_backward_pre_hook_of_a_child_is_not_skipped():
    """``register_full_backward_pre_hook`` on a child: the hook runs in backward, as in eager."""
    calls = []
    torch.manual_seed(0)
    net = Hooked()
    net.fc.register_full_backward_pre_hook(lambda module, grad_output: calls.append("bw") or None)
    x = torch.randn(2, 3, requires_grad=True)
    dynacap.optimize(net)(x).sum().backward()
    assert calls == ["bw"]


def test_backward_pre_hook_added_after_capture_runs():
    calls = []
    torch.manual_seed(0)
    net = Hooked()
    compiled = dynacap.optimize(net)
    x = torch.randn(2, 3, requires_grad=True)
    compiled(x).sum().backward()
    net.fc.register_full_backward_pre_hook(lambda module, grad_output: calls.append("bw") or None)
    compiled(x).sum().backward()
    assert calls == ["bw"]


def test_hook_added_to_a_child_guarded_by_identity_is_seen():
    with dynacap.config.patch(share_graphs_across_instances=False):
        torch.manual_seed(0)
        net = Hooked()
        compiled = dynacap.optimize(net)
        x = torch.randn(2, 3)
        torch.testing.assert_close(compiled(x), net(x))
        net.fc.register_forward_hook(lambda module, args, output: output * 0)
        torch.testing.assert_close(compiled(x), net(x))


def test_hook_registered_in_forward_runs_as_in_eager():
    class Net(Hooked):
        def forward(self, x):
            if not self.fc._forward_hooks:
                self.fc.register_forward_hook(lambda module, args, output: output * 10)
            return self.fc(x) + 1

    torch.manual_seed(0)
    eager, captured = Net(), Net()
    captured.load_state_dict(eager.state_dict())
    compiled = dynacap.optimize(captured)
    for _ in range(2):
        x = torch.randn(2, 3)
        torch.testing.assert_close(compiled(x), eager(x))
    assert len(captured.fc._forward_hooks) == len(eager.fc._forward_hooks) == 1
