"""Landlock for case workers: writes only under given folders, no TCP, scoped signals and sockets.

Called by :func:`dynacap.harness.sandbox.apply` inside the worker before any
project code is loaded.  The ruleset handles every write right (so creating
files, folders, FIFOs and *pathname UNIX sockets* is allowed only under the
allowed folders), TCP bind/connect (ABI 4+), and the ABI 6 scopes: signals
only to processes of the same sandbox, no connection to abstract UNIX sockets
made outside it.  :func:`abi` probes without restricting anything.  This
module must not run user code or decide statuses.
"""
from __future__ import annotations

import ctypes
import os

from .namespaces import libc as c_library

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

WRITE_FILE = 1 << 1
MAKE_SOCK = 1 << 9
#: write rights of ABI 1: write, remove dir/file, make char/dir/reg/sock/fifo/block/sym
WRITE = WRITE_FILE | sum(1 << b for b in range(4, 13))
REFER, TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi(libc=None) -> int:
    """Landlock ABI version of the running kernel (0: none)."""
    try:
        libc = libc or c_library()
    except OSError:
        return 0
    v = libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, v)


def restrict(writable: list[tuple[str, int]], libc=None) -> dict:
    """Restrict the calling thread (and its future children); returns what is enforced."""
    libc = libc or c_library()
    version = abi(libc)
    if version < 1:
        return {"landlock": "unavailable"}
    fs = WRITE | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0)
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if version >= 4 else 0
    scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if version >= 6 else 0
    attr = _RulesetAttr(fs, net, scoped)
    size = 24 if version >= 6 else 16 if version >= 4 else 8
    rfd = libc.syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if rfd < 0:
        return {"landlock": f"failed (errno {ctypes.get_errno()})"}
    try:
        for path, access in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneath(access & fs, fd)
                libc.syscall(_ADD_RULE, ctypes.c_int(rfd), ctypes.c_int(_RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return {"landlock": "failed (no_new_privs)"}
        if libc.syscall(_RESTRICT, ctypes.c_int(rfd), ctypes.c_uint32(0)) != 0:
            return {"landlock": f"failed (errno {ctypes.get_errno()})"}
    finally:
        os.close(rfd)
    shown = f"abi {version}" + (", tcp blocked" if net else "") + (", signals and abstract sockets scoped"
                                                                  if scoped else "")
    return {"landlock": shown, "landlock_abi": version}
