import ctypes
import os
import time

import torch.nn as nn

_STARTED = []


def _daemon():
    if os.fork():
        os._exit(0)
    os.setsid()
    try:
        ctypes.CDLL(None).prctl(15, b"dcprobe-daemon", 0, 0, 0)    # PR_SET_NAME
    except OSError:
        pass
    time.sleep(60)
    os._exit(0)


class Daemonize(nn.Module):
    def __init__(self):
        super().__init__()
        if not _STARTED:
            _STARTED.append(1)
            pid = os.fork()
            if pid == 0:
                os.setsid()
                _daemon()
            os.waitpid(pid, 0)

    def forward(self, x):
        return x * 3
