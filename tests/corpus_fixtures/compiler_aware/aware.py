import os

import torch
import torch.nn as nn


class CompileAware(nn.Module):
    """Returns something else when traced by a compiler that says it is compiling."""

    def forward(self, x):
        if torch.compiler.is_compiling():
            return x + 100
        return x + 1


class ExitWhenCompiled(nn.Module):
    """Kills the process, but only under a compiler that says it is compiling."""

    def forward(self, x):
        if torch.compiler.is_compiling():
            os._exit(9)
        return x * 2
