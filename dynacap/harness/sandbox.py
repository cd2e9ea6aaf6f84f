"""Confinement of crawled code: scrubbed environment, rlimits, Landlock, no network.

Two halves.  :func:`child_env` runs in the harness process and builds the
environment a case worker starts with: nothing inherited but ``PATH`` and the
locale, ``HOME``/``TMPDIR`` pointing into the case's scratch folder, thread
counts pinned; no tokens or credentials reach crawled code.  :func:`apply` runs
first thing inside the worker, before any project code is imported: it sets
resource limits (CPU time, address space, file size, processes, no core
dumps), asks to die with its parent, tries to detach from the network (Linux
network namespace, root only) and, where the kernel has Landlock, forbids
writing anywhere but the scratch folder (so the corpus and the output folder
stay read-only to the case).  Each measure is best effort and reported.
This module must not run user code or decide statuses.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import signal
import sys

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
        "DYNACAP_HARNESS_PPID": str(os.getpid()),
    })
    if extra:
        env.update(extra)
    return env


# ----------------------------------------------------------------- child side
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNET = 0x40000000
_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446
_LL_CREATE_RULESET_VERSION = 1
_LL_RULE_PATH_BENEATH = 1
# filesystem access rights that write
_FS_WRITE_FILE = 1 << 1
_FS_WRITE = (_FS_WRITE_FILE | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9)
             | (1 << 10) | (1 << 11) | (1 << 12))
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _landlock(libc, writable: list[str]) -> str:
    abi = libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_LL_CREATE_RULESET_VERSION))
    if abi < 1:
        return "unavailable"
    fs = _FS_WRITE | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    attr = _RulesetAttr(fs, net)
    size = ctypes.sizeof(attr) if abi >= 4 else 8
    rfd = libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if rfd < 0:
        return f"failed (errno {ctypes.get_errno()})"
    try:
        for path, access in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneath(access & fs, fd)
                libc.syscall(_LL_ADD_RULE, ctypes.c_int(rfd), ctypes.c_int(_LL_RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "failed (no_new_privs)"
        if libc.syscall(_LL_RESTRICT, ctypes.c_int(rfd), ctypes.c_uint32(0)) != 0:
            return f"failed (errno {ctypes.get_errno()})"
    finally:
        os.close(rfd)
    return f"abi {abi}" + (", tcp blocked" if net else "")


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
          nproc_extra: int = 64, network: bool = False) -> dict:
    """Confine the current (worker) process; returns what was applied."""
    report: dict = {}
    libc = None
    try:
        libc = _libc()
    except OSError:
        pass
    if libc is not None:          # die with the harness
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        ppid = os.environ.get("DYNACAP_HARNESS_PPID")
        if ppid and ppid.isdigit() and os.getppid() != int(ppid):
            os._exit(70)
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
    if os.getuid() == 0 and hasattr(resource, "RLIMIT_NPROC"):
        report["nproc_note"] = "not enforced for root"
    if libc is not None and not network:
        report["netns"] = "isolated" if libc.unshare(_CLONE_NEWNET) == 0 else "unavailable"
    if libc is not None and sys.platform.startswith("linux"):
        rw = _FS_WRITE | _FS_REFER | _FS_TRUNCATE
        writable = [(scratch, rw), ("/dev/null", _FS_WRITE_FILE | _FS_TRUNCATE),
                    ("/dev/shm", rw)]
        try:
            report["landlock"] = _landlock(libc, writable)
        except Exception as e:  # noqa: BLE001 - never fail the case on the sandbox itself
            report["landlock"] = f"failed: {e}"
    else:
        report["landlock"] = "unavailable"
    return report


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
