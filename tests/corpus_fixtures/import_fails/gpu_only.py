import torch.nn as nn

raise RuntimeError("this file needs a GPU at import time")


class NeverLoads(nn.Module):
    def forward(self, x):
        return x
