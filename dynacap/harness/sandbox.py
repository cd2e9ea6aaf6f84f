"""Confinement of crawled code: scrubbed environment, rlimits, Landlock, no network, no capabilities.

Two halves.  :func:`child_env` runs in the harness process and builds the
environment a case worker starts with: nothing inherited but ``PATH`` and the
locale, ``HOME``/``TMPDIR`` pointing into the case's scratch folder, thread
counts pinned; no tokens or credentials reach crawled code.  :func:`apply` runs
first thing inside the worker, before any project code is imported: it sets
resource limits (CPU time, address space, file size, processes, no core
dumps), tries to detach from the network (network namespace), applies
Landlock (:mod:`dynacap.harness.landlock`: writes only in the scratch folder
and the case's private ``/dev/shm``, no TCP, scoped signals and
abstract sockets) and drops every capability.  Namespaces, the process limit
and killing leftovers are the launcher's (:mod:`dynacap.harness.launcher`).
Each measure is best effort and reported.
This module must not run user code or decide statuses.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

from .namespaces import libc as c_library

#: Environment variables a worker may inherit (values are not secrets).
PASS_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def child_env(scratch: str, extra: dict | None = None) -> dict:
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    tmp = os.path.join(scratch, "tmp")
    os.makedirs(tmp, exist_ok=True)
    env.update({
        "HOME": scratch, "TMPDIR": tmp, "TEMP": tmp, "TMP": tmp,
        "XDG_CACHE_HOME": os.path.join(scratch, ".cache"),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, ".inductor"),
        "TRITON_CACHE_DIR": os.path.join(scratch, ".triton"),
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0",
    })
    if extra:
        env.update(extra)
    return env


# ----------------------------------------------------------------- child side
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CLONE_NEWNET = 0x40000000
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(libc) -> str:
    """No capability left, none regained by exec (root keeps its uid, not its privileges)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data) != 0:
        return f"failed (errno {ctypes.get_errno()})"
    return "dropped"


def _count_user_tasks() -> int:
    uid, n = os.getuid(), 0
    try:
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if os.stat(f"/proc/{pid}").st_uid == uid:
                        n += len(os.listdir(f"/proc/{pid}/task"))
                except OSError:
                    pass
    except OSError:
        return 0
    return n


def apply(scratch: str, *, cpu_s: float, memory_mb: int, file_mb: int = 256,
          nproc_extra: int = 64, network: bool = False, private_dirs: tuple = ()) -> dict:
    """Confine the current (worker) process; returns what was applied.

    ``private_dirs`` are folders the case's mount namespace made its own
    (``/dev/shm``): writable like the scratch folder, but for UNIX sockets
    (``/tmp`` stays read-only: the case's temporary folder is in its scratch
    folder).
    """
    report: dict = {}
    libc = None
    try:
        libc = c_library()
    except OSError:
        pass
    limits = [("cpu_s", resource.RLIMIT_CPU, int(cpu_s) + 1),
              ("core", resource.RLIMIT_CORE, 0),
              ("fsize_mb", resource.RLIMIT_FSIZE, file_mb << 20)]
    if memory_mb:
        limits.append(("as_mb", resource.RLIMIT_AS, memory_mb << 20))
    if hasattr(resource, "RLIMIT_NPROC"):
        limits.append(("nproc", resource.RLIMIT_NPROC, _count_user_tasks() + nproc_extra))
    for key, res, val in limits:
        try:
            soft, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY:
                val = min(val, hard)
            resource.setrlimit(res, (val, val if hard == resource.RLIM_INFINITY else hard))
            report[key] = val if key not in ("fsize_mb", "as_mb") else val >> 20
        except (ValueError, OSError) as e:
            report[key] = f"failed: {e}"
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # oversize writes fail instead of killing
    except (OSError, ValueError):
        pass
    if libc is not None and not network:
        report["netns"] = "isolated" if libc.unshare(_CLONE_NEWNET) == 0 else "unavailable"
    if libc is not None and sys.platform.startswith("linux"):
        from . import landlock
        rw = landlock.WRITE | landlock.REFER | landlock.TRUNCATE
        writable = [(scratch, rw), ("/dev/null", landlock.WRITE_FILE | landlock.TRUNCATE)]
        writable += [(d, rw & ~landlock.MAKE_SOCK) for d in private_dirs]     # sockets: scratch only
        try:
            report.update(landlock.restrict(writable, libc))
        except Exception as e:  # noqa: BLE001 - never fail the case on the sandbox itself
            report["landlock"] = f"failed: {e}"
        report["capabilities"] = _drop_capabilities(libc)
    else:
        report["landlock"] = "unavailable"
    return report


def launcher_facts(launcher: dict, task_sandbox: dict) -> dict:
    """What the launcher set up for the worker (and the harness for it: ``task_sandbox``),
    in the form of the sandbox report."""
    mounts = launcher.get("mounts") or {}
    cgroup = launcher.get("cgroup") or f"unavailable ({task_sandbox.get('cgroup_note') or 'none'})"
    facts = {"pidns": launcher.get("pidns"), "namespaces": launcher.get("namespaces"),
             "private": list(mounts.get("private", [])), "proc": mounts.get("proc", "shared"),
             "cgroup": f"pids.max {task_sandbox.get('cgroup_limit')}" if cgroup == "joined" else cgroup}
    if mounts.get("error") or mounts.get("failed"):
        facts["mount_errors"] = [mounts["error"]] if mounts.get("error") else []
        facts["mount_errors"] += mounts.get("failed", [])
    if launcher.get("host_root"):
        facts["nproc_note"] = "not enforced for root"
    return facts


def protections(sb: dict) -> dict[str, bool]:
    """Each protection of the threat model (docs/corpus.md) and whether ``sb``, a sandbox
    report, has it; ``--require-sandbox`` wants them all."""
    pidns = sb.get("pidns") == "own" and sb.get("proc") in ("own", "hidden")
    cgroup = str(sb.get("cgroup", "")).startswith("pids.max")
    ll = str(sb.get("landlock", ""))
    abi = sb.get("landlock_abi") or 0
    return {
        "own PID namespace and /proc": pidns,
        "private /tmp and /dev/shm": {"/tmp", "/dev/shm"} <= set(sb.get("private") or ()),
        "every case process killed at the end": pidns or cgroup,
        "process limit that holds for root": cgroup or (isinstance(sb.get("nproc"), int)
                                                         and not sb.get("nproc_note")),
        "writes only in scratch (Landlock)": ll.startswith("abi"),
        "no network (network namespace)": sb.get("netns") == "isolated",
        "signals and abstract sockets scoped (Landlock 6)": abi >= 6,
        "no capabilities": sb.get("capabilities") == "dropped",
    }


def boot_script(entry: str) -> str:
    """Source for ``python -I -B -c``: put the harness on sys.path (``argv[1]``), then run ``entry``.

    If the ``dynacap`` package itself fails to import (the capture engine is
    broken), the harness is loaded alone and the error remembered, so that
    the dynacap compiler reports ``compile_error`` while Dynamo still runs.
    """
    return (
        "import sys, types\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "try:\n"
        "    import dynacap\n"
        "except BaseException as e:\n"
        "    for k in [k for k in sys.modules if k == 'dynacap' or k.startswith('dynacap.')]:\n"
        "        del sys.modules[k]\n"
        "    pkg = types.ModuleType('dynacap')\n"
        "    pkg.__path__ = [sys.argv[1] + '/dynacap']\n"
        "    pkg.__harness_import_error__ = '%s: %s' % (type(e).__name__, e)\n"
        "    sys.modules['dynacap'] = pkg\n"
        + entry + "\n"
    )
