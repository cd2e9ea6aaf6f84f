"""Case launcher: the process tree of one case worker, and the channel its results come through.

Runs in the process that :mod:`dynacap.harness.isolation` starts for a case
(a fork of the zygote, or a fresh interpreter), before any project code is
loaded.  The launcher joins the case's ``pids`` cgroup, unshares PID and
mount namespaces (:mod:`dynacap.harness.namespaces`) and forks the
namespace's init, which sets up the private mounts and forks the worker
(:func:`dynacap.harness.worker.work`); the init reaps orphans and exits when
the worker exits, and the kernel then kills everything left in the
namespace, whatever ``setsid`` or double forks did.  Without namespaces the
worker is the launcher's child and the launcher, a child subreaper, kills
every descendant left.

The worker reports through a pipe to the launcher, never through a file the
case could write.  The launcher is the only writer of ``events.jsonl`` (in
the case folder, outside the scratch folder the case may write): it accepts
only the worker protocol in order (``sandbox``, then ``start``/``done`` of
each phase of the task, once) and answers anything else on the channel with a
``violation`` event and the worker's death.  It must not run user code, nor
decide statuses (the harness does).
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import struct
import time

from .case import STATUSES
from .namespaces import libc as c_library

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER, _PR_SET_DUMPABLE = 1, 36, 4
MAX_LINE = 4 << 20


def _die_with_parent(libc, expected_ppid: int | None) -> None:
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if expected_ppid is not None and os.getppid() != expected_ppid:
        os._exit(70)               # the parent died before the signal was armed


class Protocol:
    """The order of events a real worker sends; anything else is a violation."""

    def __init__(self, phases: list[str]):
        self.phases = list(phases)
        self.next = 0
        self.current: str | None = None
        self.sandbox = False
        self.closed = False

    def check(self, ev) -> str | None:
        """None if ``ev`` is the next event of the protocol, else why not."""
        if not isinstance(ev, dict):
            return "not an event object"
        kind = ev.get("event")
        if self.closed:
            return f"{kind!r} after the last phase"
        if kind == "sandbox":
            if self.sandbox:
                return "second sandbox event"
            self.sandbox = True
            self.closed = not self.phases
            return None
        if not self.sandbox:
            return f"{kind!r} before the sandbox event"
        phase = ev.get("phase")
        if kind == "start":
            if self.current is not None:
                return f"start of {phase!r} while {self.current!r} runs"
            if self.next >= len(self.phases) or phase != self.phases[self.next]:
                return f"start of {phase!r}, expected {self.phases[self.next:self.next + 1]}"
            self.current = phase
            self.next += 1
            return None
        if kind == "done":
            if phase != self.current or phase is None:
                return f"result for {phase!r} while {self.current!r} runs"
            res = ev.get("result")
            if not isinstance(res, dict) or res.get("status") not in STATUSES:
                return f"malformed result for {phase!r}"
            self.current = None
            if self.next >= len(self.phases) or (phase == "prepare" and res.get("status") != "ok"):
                self.closed = True
            return None
        return f"unknown event {kind!r}"


class _Relay:
    """Reads the worker's channel, checks it, writes ``events.jsonl``."""

    def __init__(self, fd: int, out_fd: int, phases: list[str]):
        self.fd, self.out_fd = fd, out_fd
        self.proto = Protocol(phases)
        self.buf = b""
        self.violation: str | None = None
        self.eof = False
        os.set_blocking(fd, False)

    def write(self, ev: dict) -> None:
        os.write(self.out_fd, (json.dumps(ev) + "\n").encode())

    def pump(self) -> None:
        while not self.eof and self.violation is None:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
                return
            self.buf += chunk
            while b"\n" in self.buf and self.violation is None:
                line, self.buf = self.buf.split(b"\n", 1)
                self._line(line)
            if len(self.buf) > MAX_LINE:
                self._violate("oversized message")

    def _line(self, line: bytes) -> None:
        try:
            ev = json.loads(line)
        except ValueError:
            self._violate("a line that is not JSON")
            return
        why = self.proto.check(ev)
        if why:
            self._violate(why)
            return
        ev["t_seen"] = time.time()
        self.write(ev)

    def _violate(self, why: str) -> None:
        self.violation = why
        self.write({"event": "violation", "detail": why, "phase": self.proto.current, "t_seen": time.time()})


def _children() -> list[int]:
    out = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    return out


def _kill_descendants(deadline_s: float = 5.0) -> int:
    """As subreaper: kill and reap every process left below us (orphans come to us)."""
    killed: set[int] = set()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        kids = _children()
        for pid in kids:
            killed.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            if not kids:
                break
        if not kids:
            break
        time.sleep(0.005)
    return len(killed)


def _home_of_user() -> list[str]:
    """The caller's home folder (the environment's HOME is the case's scratch by now)."""
    import pwd
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return []
    return [home] if home and home != "/" else []


def _needed_paths(case_dir: str, task: dict) -> list[str]:
    """What the worker must still see after the private mounts: its folder, the project,
    its data file, the harness package and the interpreter's paths."""
    import sys
    case = task.get("case") or {}
    paths = [case_dir, case.get("root"), case.get("data"), sys.prefix, sys.exec_prefix,
             os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
    return paths + [p for p in sys.path if p]


def _init(libc, worker, task_path: str, chan_w: int, status_w: int, case_dir: str, seen: dict,
          task: dict) -> None:
    """PID 1 of the case namespace: mounts, the worker, reaping; exits when the worker exits."""
    from . import namespaces
    _die_with_parent(libc, None)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        mounts = namespaces.setup_mounts(_needed_paths(case_dir, task), case_dir,
                                         namespaces.HOME_DIRS + tuple(seen.get("homes", ())))
    except Exception as e:  # noqa: BLE001 - reported, and the sandbox report shows what is missing
        mounts = {"private": [], "error": f"{type(e).__name__}: {e}"}
    pid = os.fork()
    if pid == 0:
        os.close(status_w)
        libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        _die_with_parent(libc, 1)
        _run_worker(worker, task_path, chan_w, dict(seen, pidns="own", mounts=mounts))
    os.close(chan_w)
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if got == pid:
            os.write(status_w, struct.pack("i", status))
            os._exit(0)                    # the kernel kills the rest of the namespace


def _run_worker(worker, task_path: str, chan_w: int, info: dict) -> None:
    try:
        worker(task_path, chan_w, info)
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        os._exit(70)
    os._exit(0)


def _exit_like(status: int) -> None:
    """End this process the way the worker ended (signal or exit code)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)


def launch(task_path: str, worker) -> None:
    """Run ``worker(task_path, channel_fd, info)`` confined; never returns."""
    case_dir = os.path.dirname(os.path.abspath(task_path))
    with open(task_path) as f:
        task = json.load(f)
    sbx = task.get("sandbox") or {}
    libc = c_library()
    seen: dict = {"event": "launcher", "host_root": os.getuid() == 0, "homes": _home_of_user()}
    if sbx.get("cgroup"):
        try:
            with open(os.path.join(sbx["cgroup"], "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            seen["cgroup"] = "joined"
        except OSError as e:
            seen["cgroup"] = f"failed: {e.strerror}"
    seen["subreaper"] = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    out_fd = os.open(os.path.join(case_dir, "events.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    chan_r, chan_w = os.pipe()
    status_r, status_w = os.pipe()
    from . import namespaces
    mode, note = (None, "disabled") if sbx.get("namespaces") is False else namespaces.unshare_case()
    seen.update(namespaces=mode or "unavailable", namespaces_note=note)
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(chan_r)
        os.close(status_r)
        os.close(out_fd)
        if mode:
            _init(libc, worker, task_path, chan_w, status_w, case_dir, seen, task)
        os.close(status_w)
        _die_with_parent(libc, me)
        _run_worker(worker, task_path, chan_w, dict(seen, pidns="shared", mounts={"private": []}))
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)     # no /proc/<pid>/fd of ours for the case
    os.close(chan_w)
    os.close(status_w)
    relay = _Relay(chan_r, out_fd, task.get("phases") or [])
    relay.write(seen)
    status = _supervise(pid, mode is not None, relay, status_r)
    if mode is None:
        left = _kill_descendants()
        if left:
            relay.write({"event": "launcher", "killed_leftovers": left})
    _exit_like(status)


def _supervise(pid: int, namespaced: bool, relay: _Relay, status_r: int) -> int:
    """Relay events until the worker ends; returns the worker's wait status."""
    status = None
    while status is None:
        fds = [relay.fd] if not relay.eof else []
        fds += [status_r] if namespaced else []
        ready, _, _ = select.select(fds, [], [], 0.1)
        if relay.fd in ready:
            relay.pump()
        if relay.violation is not None:
            os.kill(pid, signal.SIGKILL)   # the init's death takes the namespace with it
        if namespaced and status_r in ready:
            data = os.read(status_r, 4)
            status = struct.unpack("i", data)[0] if len(data) == 4 else None
            if status is None:             # the init died without a word: killed
                status = os.waitpid(pid, 0)[1]
                break
            os.waitpid(pid, 0)
        elif not namespaced:
            got, st = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                status = st
    relay.pump()
    return status
