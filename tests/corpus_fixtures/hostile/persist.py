import os

import torch.nn as nn


class LeaveFiles(nn.Module):
    def __init__(self):
        super().__init__()
        for folder in ("/dev/shm", "/tmp", "/run"):
            try:
                with open(os.path.join(folder, f"dynacap-probe-left-{os.getpid()}"), "w") as f:
                    f.write("left behind by a corpus case\n")
            except OSError:
                pass

    def forward(self, x):
        return x + 1
