"""Fork server ("zygote") that pre-imports torch so case workers start in milliseconds.

Starting a worker from scratch costs seconds (importing torch, warming
torch.compile).  The zygote is started once per harness process with the
scrubbed environment, imports and warms everything while single-threaded,
then forks one child per case.  The child starts a new session, redirects its
output to the case folder, closes the zygote's pipes, takes the case's
environment, and runs :func:`dynacap.harness.worker.main` (the launcher),
which confines it exactly as a freshly started worker.  Protocol: JSON lines, requests on the zygote's stdin and
replies (``ready``, ``spawned``, ``exit``) on its stdout.  If the zygote is
unavailable the harness falls back to plain subprocesses.  Neither side must
run user code before the child has confined itself, and the zygote must not
start threads (it forks).
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

from .sandbox import boot_script

BOOT = boot_script("from dynacap.harness.zygote import serve\nserve()")


# ------------------------------------------------------------------ zygote side
def _warm() -> dict:
    import torch
    info = {}
    try:
        torch.compile(lambda x: x + 1, backend=lambda gm, ex: gm.forward)(torch.ones(1))
        torch.compiler.reset()
        info["dynamo"] = "warm"
    except Exception as e:  # noqa: BLE001
        info["dynamo"] = f"cold: {e}"
    mod = sys.modules.get("dynacap")
    if mod is not None and not getattr(mod, "__harness_import_error__", None):
        try:
            mod.optimize(lambda x: x + 1, backend="eager")(torch.ones(1))
            mod.reset()
            info["dynacap"] = "warm"
        except Exception as e:  # noqa: BLE001
            info["dynacap"] = f"cold: {e}"
    return info


def _close_inherited_channels() -> None:
    """Close the zygote's pipes and sockets above stderr: the case must not reach the harness."""
    import stat
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:
            pass


def _child(req: dict) -> None:
    """In the forked child: become the case worker (never returns)."""
    try:
        os.setsid()
        fd_in = os.open(os.devnull, os.O_RDONLY)
        fd_out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fd_err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd_in, 0)
        os.dup2(fd_out, 1)
        os.dup2(fd_err, 2)
        for fd in (fd_in, fd_out, fd_err):
            os.close(fd)
        _close_inherited_channels()
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile
        tempfile.tempdir = None            # pick up the case's TMPDIR
        os.chdir(req["cwd"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        from .worker import main
        main(req["task"])
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
    finally:
        os._exit(70)


def serve() -> None:
    """Main loop of the zygote process; it ends when the harness closes its stdin
    (also when the harness dies), killing the children still running."""
    import torch  # noqa: F401 - the point of the zygote
    from . import worker  # noqa: F401
    from . import compare, compilers, inference, loader, stubs, values  # noqa: F401
    info = _warm()
    out = sys.stdout

    def reply(**msg):
        out.write(json.dumps(msg) + "\n")
        out.flush()

    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    reply(op="ready", pid=os.getpid(), threads=threads, **info)
    stdin = sys.stdin.fileno()
    buf = b""
    children: set[int] = set()
    while True:
        r, _, _ = select.select([stdin], [], [], 0.05)
        if r:
            chunk = os.read(stdin, 65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    req = json.loads(line)
                except ValueError:
                    continue
                pid = os.fork()
                if pid == 0:
                    _child(req)
                children.add(pid)
                reply(op="spawned", id=req["id"], pid=pid)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            children.discard(pid)
            reply(op="exit", pid=pid, rc=os.waitstatus_to_exitcode(status))
    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


# ------------------------------------------------------------------ harness side
class ZygoteDied(Exception):
    pass


class Zygote:
    """Client of one zygote process; thread-safe."""

    def __init__(self, package_parent: str, env: dict, log_path: str, ready_timeout: float = 120.0):
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", BOOT, package_parent],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     env=env, cwd=env.get("HOME"), start_new_session=True)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._spawned: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self._next = 0
        self.ready: dict | None = None
        self.dead = False
        self._reader = threading.Thread(target=self._read, daemon=True, name="dynacap-zygote-reader")
        self._reader.start()
        with self._cond:
            self._cond.wait_for(lambda: self.ready is not None or self.dead, timeout=ready_timeout)
        if self.ready is None:
            self.close()
            raise ZygoteDied("zygote did not start")
        if int(self.ready.get("threads", 1)) > 1:   # forking a threaded process is unsafe
            self.close()
            raise ZygoteDied(f"zygote has {self.ready['threads']} threads after warm-up")

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                if msg.get("op") == "ready":
                    self.ready = msg
                elif msg.get("op") == "spawned":
                    self._spawned[msg["id"]] = msg["pid"]
                elif msg.get("op") == "exit":
                    self._exits[msg["pid"]] = msg["rc"]
                self._cond.notify_all()
        with self._cond:
            self.dead = True
            self._cond.notify_all()

    def alive(self) -> bool:
        return not self.dead and self.proc.poll() is None

    def spawn(self, task: str, env: dict, cwd: str, stdout: str, stderr: str) -> int:
        with self._cond:
            if self.dead:
                raise ZygoteDied("zygote is gone")
            rid = self._next
            self._next += 1
            data = json.dumps({"id": rid, "task": task, "env": env, "cwd": cwd, "stdout": stdout,
                               "stderr": stderr}) + "\n"
            try:
                self.proc.stdin.write(data.encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                raise ZygoteDied(str(e))
            if not self._cond.wait_for(lambda: rid in self._spawned or self.dead, timeout=30):
                raise ZygoteDied("no answer from zygote")
            if rid not in self._spawned:
                raise ZygoteDied("zygote is gone")
            return self._spawned.pop(rid)

    def wait(self, pid: int, timeout: float) -> int | None:
        """Exit code of ``pid`` (negative: signal), or None on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while pid not in self._exits:
                left = deadline - time.monotonic()
                if left <= 0 or self.dead:
                    return self._exits.pop(pid, None)
                self._cond.wait(timeout=min(left, 0.5))
            return self._exits.pop(pid)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        self._log.close()
