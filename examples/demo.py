"""A short tour: a captured function and a captured model, with their explain reports."""
import io

import torch
import torch.nn as nn

import dynacap

log = io.StringIO()


def helper(x):
    return torch.relu(x) * 2


@dynacap.optimize(backend="eager")
def fn(x, y):
    z = torch.sin(x) + torch.cos(y)
    print("computed z", file=log)  # a graph break: print runs eagerly
    return helper(z) - 1


class MLP(nn.Module):
    def __init__(self, width=16, depth=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def main():
    torch.manual_seed(0)
    x, y = torch.randn(4), torch.randn(4)
    out = fn(x, y)
    expected = helper(torch.sin(x) + torch.cos(y)) - 1
    print("function result matches eager:", torch.allclose(out, expected))
    print(dynacap.explain(fn)(x, y))
    print()

    model = MLP()
    captured = dynacap.optimize(model, backend="eager")
    inp = torch.randn(2, 16)
    print("model result matches eager:", torch.allclose(captured(inp), model(inp)))
    print(dynacap.explain(model)(inp))


if __name__ == "__main__":
    main()
