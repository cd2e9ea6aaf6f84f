import ctypes

import torch.nn as nn


class Segfaulter(nn.Module):
    def forward(self, x):
        ctypes.string_at(0)     # reads address 0: SIGSEGV
        return x
