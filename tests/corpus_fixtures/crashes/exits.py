import os
import sys

import torch.nn as nn


class HardExit(nn.Module):
    def forward(self, x):
        os._exit(3)


class SoftExit(nn.Module):
    def forward(self, x):
        sys.exit(2)
