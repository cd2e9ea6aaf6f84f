import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, in_features, hidden_dim, num_classes, dropout: float, use_bias: bool = True):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden_dim, bias=use_bias), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden_dim, num_classes))

    def forward(self, x):
        return torch.log_softmax(self.net(x), dim=-1)


class ConfigNet(nn.Module):
    """Reads its sizes from a config object."""

    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.out = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden_states):
        return self.out(self.norm(self.proj(hidden_states)))


class MultiKernel(nn.Module):
    """Needs a list: iterating an int fails, which steers the search."""

    def __init__(self, channels, kernel_sizes):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, k, padding=k // 2) for k in kernel_sizes)

    def forward(self, x):
        return sum(c(x) for c in self.convs)
