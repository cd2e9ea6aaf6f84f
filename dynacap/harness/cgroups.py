"""A ``pids`` cgroup per case: a process limit that holds for root, and a kill of everything left.

Runs in the harness process (or on a Dask worker).  :func:`case_group` makes a
child cgroup of the harness's own ``pids`` cgroup (cgroup v1 ``pids``
hierarchy, or v2 where the ``pids`` controller is delegated) with
``pids.max`` set; the case launcher moves itself into it before it forks, so
every process and thread of the case counts, whoever it runs as.
:meth:`CaseGroup.close` kills whatever is still in it (``cgroup.kill`` on v2,
each listed pid on v1, until it is empty) and removes it.  Unavailable
cgroups are reported, never fatal; folders left by a harness that was killed
are removed by the next one.  This module must not run user code.
"""
from __future__ import annotations

import itertools
import os
import signal
import threading
import time

_COUNTER = itertools.count()
_BASE: dict = {}
_BASE_LOCK = threading.Lock()


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fs type, super options) of each cgroup mount."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                a, b = left.split(), right.split()
                if len(a) >= 5 and len(b) >= 3 and b[0] in ("cgroup", "cgroup2"):
                    out.append((a[3], a[4], b[0], b[2]))
    except OSError:
        pass
    return out


def _own_path(v2: bool) -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                hid, ctrls, path = line.rstrip("\n").split(":", 2)
                if (v2 and hid == "0") or (not v2 and "pids" in ctrls.split(",")):
                    return path
    except OSError:
        pass
    return None


def _candidates() -> list[tuple[str, bool]]:
    out = []
    for root, point, fstype, opts in _mounts():
        v2 = fstype == "cgroup2"
        if not v2 and "pids" not in opts.split(","):
            continue
        own = _own_path(v2)
        if own is None:
            continue
        rel = own[len(root):] if own.startswith(root) and root != "/" else own
        out.append((os.path.join(point, rel.lstrip("/")), v2))
    out.sort(key=lambda c: c[1])            # v1 pids first: no delegation rules to meet
    return out


def _sweep_stale(parent: str) -> None:
    """Remove the folders of harness processes that died without cleaning up (killed),
    killing whatever of theirs is still there."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name[len("dynacap-"):]
        if not name.startswith("dynacap-") or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        base = os.path.join(parent, name)
        for case in (os.listdir(base) if os.path.isdir(base) else []):
            if case.startswith("case-"):
                path = os.path.join(base, case)
                _kill_all(path, os.path.exists(os.path.join(path, "cgroup.kill")))
                _remove_when_empty(path)
        _remove(base)


def run_base() -> tuple[str | None, bool, str]:
    """This process's folder for case cgroups (made once); (path, is_v2, note)."""
    with _BASE_LOCK:
        if "path" not in _BASE:
            _BASE.update(path=None, v2=False, note="no pids cgroup hierarchy")
            for parent, v2 in _candidates():
                _sweep_stale(parent)
                path = os.path.join(parent, f"dynacap-{os.getpid()}")
                try:
                    os.makedirs(path, exist_ok=True)
                    if not os.path.exists(os.path.join(path, "pids.max")):
                        os.rmdir(path)
                        _BASE["note"] = f"pids controller not delegated under {parent}"
                        continue
                    if v2:      # children of a v2 cgroup get pids only if it is enabled here
                        with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                            f.write("+pids")
                except OSError as e:
                    _BASE["note"] = f"{parent}: {e.strerror}"
                    continue
                _BASE.update(path=path, v2=v2, note="")
                import atexit
                atexit.register(_remove, path)
                break
        return _BASE["path"], _BASE["v2"], _BASE["note"]


def _remove(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _pids(path: str) -> list[int]:
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


class CaseGroup:
    """The cgroup of one case (``path`` None when unavailable; ``note`` says why)."""

    def __init__(self, max_pids: int):
        base, self.v2, note = run_base()
        self.path, self.note, self.max_pids = None, note, max_pids
        if base is None:
            return
        path = os.path.join(base, f"case-{next(_COUNTER)}")
        try:
            os.mkdir(path)
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(max_pids))
        except OSError as e:
            self.note = f"{path}: {e.strerror}"
            _remove(path)
            return
        self.path = path

    def describe(self) -> str:
        return f"pids.max {self.max_pids}" if self.path else f"unavailable ({self.note})"

    def kill_all(self) -> int:
        """Kill every process still in the group; returns how many were seen."""
        return _kill_all(self.path, self.v2) if self.path else 0

    def close(self) -> int:
        n = self.kill_all()
        if self.path:
            _remove_when_empty(self.path)
        return n


def _kill_all(path: str, v2: bool, timeout_s: float = 5.0) -> int:
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    if v2:
        try:
            with open(os.path.join(path, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass
    while time.monotonic() < deadline:
        pids = _pids(path)
        if not pids:
            break
        for pid in pids:     # a fork racing the kill is caught on the next round
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    return len(seen)


def _remove_when_empty(path: str) -> None:
    for _ in range(100):     # the kernel removes killed tasks asynchronously
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
