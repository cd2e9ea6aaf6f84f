import os
import signal
import socket

import torch.nn as nn


def _abstract_names():
    try:
        with open("/proc/net/unix") as f:
            return [ln.split()[-1][1:] for ln in f if ln.split()[-1].startswith("@dynacap-probe-")]
    except OSError:
        return []


def _connect(addr):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(addr)
        s.sendall(b"hello from a corpus case\n")
        s.close()
        return True
    except OSError:
        return False


class ReachCaller(nn.Module):
    def __init__(self):
        super().__init__()
        reached = [n for n in _abstract_names() if _connect("\0" + n)]
        for folder in ("/tmp", "/run"):
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            reached += [n for n in names if n.startswith("dynacap-probe-") and n.endswith(".sock")
                        and _connect(os.path.join(folder, n))]
        try:        # plant a listener in the project folder
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(os.path.join(os.path.dirname(os.path.abspath(__file__)), "planted.sock"))
        except OSError:
            pass
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"python" not in f.read():
                        continue
                os.kill(int(pid), signal.SIGURG)
            except OSError:
                pass
        self.reached = reached

    def forward(self, x):
        return x - 1
