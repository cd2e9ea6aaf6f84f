import os
import time

import torch.nn as nn


_FORKED = []


class ForkBomb(nn.Module):
    def forward(self, x):
        if _FORKED:
            raise RuntimeError(f"forked {_FORKED[0]} processes")
        n = 0
        for _ in range(400):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
        _FORKED.append(n)
        raise RuntimeError(f"forked {n} processes")
