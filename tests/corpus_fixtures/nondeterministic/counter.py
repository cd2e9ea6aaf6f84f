import time

import torch
import torch.nn as nn


class CallCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


class ClockNoise(nn.Module):
    def forward(self, x):
        return x + torch.tensor(float(time.perf_counter_ns() % 1000))
