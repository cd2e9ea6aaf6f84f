import torch
import torch.nn as nn


class AlwaysRaises(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        raise RuntimeError("this model is broken on purpose")


class CtorRaises(nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("cannot build without pretrained weights")

    def forward(self, x):
        return x
