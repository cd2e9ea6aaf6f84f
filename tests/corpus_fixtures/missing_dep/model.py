import torch
import torch.nn as nn

import fancy_third_party_lib as ftl
from another_missing_pkg.layers import Swish  # noqa: F401


@ftl.register_model
class StillWorks(nn.Module):
    """Uses only torch at run time: fine once the imports are stubbed."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.fc(x))


class NeedsTheLibrary(nn.Module):
    """Calls the missing library in forward: fails eagerly."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) * ftl.scale_factor(x)
