import torch.nn as nn


class GatedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            return h * 2
        return h - 1


class ItemLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        n = int(x.abs().sum().item()) % 3 + 1
        for _ in range(n):
            x = self.fc(x).relu()
        return x
