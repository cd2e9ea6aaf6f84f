"""Per-case Linux namespaces: own PID namespace (own ``/proc``) and mount namespace.

Runs in the case launcher (:mod:`dynacap.harness.launcher`), before any
project code exists in the process.  :func:`unshare_case` moves the launcher's
future children into a new PID and mount namespace (inside a new user
namespace when that works, so the case's root has no privilege over the
host; as plain root otherwise).  :func:`setup_mounts` runs in the namespace's
init process: mount events stay private, ``/tmp``, ``/dev/shm``, ``/run`` and
``/var/run`` become empty tmpfs (nothing persists across cases, no UNIX socket
of the caller is reachable there), so do the home folders (the caller's keys
and tokens); the case folder, the project and the interpreter's paths stay
where they are (bound back in, read-only but for the case folder); a fresh
``/proc`` shows only the case's processes (an empty one when the kernel
refuses a fresh proc mount).  When the namespace's init exits, the
kernel kills every process left in it.  Each step is best effort and reported;
this module must not run user code or decide statuses.
"""
from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
#: folders replaced by an empty tmpfs of the case (size in MiB, mode)
PRIVATE_DIRS = (("/tmp", 1024, "1777"), ("/dev/shm", 256, "1777"), ("/run", 16, "0755"),
                ("/var/run", 16, "0755"))
#: home folders, hidden the same way: the caller's dotfiles (keys, tokens) are not the case's
HOME_DIRS = ("/root", "/home")


def libc():
    """The C library (the program's own symbols: no ``find_library`` subprocess)."""
    return ctypes.CDLL(None, use_errno=True)


def _err(what: str) -> str:
    e = ctypes.get_errno()
    return f"{what}: {os.strerror(e)}" if e else what


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def unshare_case() -> tuple[str | None, str]:
    """Unshare PID and mount namespaces for the next child; returns (mode, note).

    ``mode`` is ``"userns"`` or ``"root"`` on success, None when neither works
    (``note`` says why).  The user namespace comes first and alone: a mapping
    that cannot be written leaves a user namespace that changes nothing
    (same kernel uid), never a PID namespace the caller did not expect.
    """
    try:
        lc = libc()
    except OSError as e:
        return None, f"no libc: {e}"
    uid, gid = os.getuid(), os.getgid()
    notes = []
    if lc.unshare(CLONE_NEWUSER) == 0:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"0 {uid} 1")
            _write("/proc/self/gid_map", f"0 {gid} 1")
        except OSError as e:
            return None, f"uid map: {e}"
        if lc.unshare(CLONE_NEWPID | CLONE_NEWNS) == 0:
            return "userns", ""
        notes.append(_err("unshare in a user namespace"))
        return None, "; ".join(notes)
    notes.append(_err("user namespace"))
    if os.geteuid() == 0:
        if lc.unshare(CLONE_NEWPID | CLONE_NEWNS) == 0:
            return "root", "; ".join(notes)
        notes.append(_err("root unshare"))
    return None, "; ".join(notes)


def _mount(lc, src, target, fstype, flags, data=None) -> bool:
    return lc.mount(src and src.encode(), target.encode(), fstype and fstype.encode(),
                      ctypes.c_ulong(flags), data and data.encode()) == 0


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outermost(paths) -> list[str]:
    out: list[str] = []
    for p in sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}):
        if not any(_under(p, q) for q in out):
            out.append(p)
    return out


def setup_mounts(keep: list[str], writable: str, homes: tuple = HOME_DIRS) -> dict:
    """In the namespace's init: private mounts; the ``keep`` paths (the case folder,
    the project, the interpreter's paths) stay reachable where they are, read-only
    but for ``writable`` (the case folder).  ``homes`` (home folders) are hidden too.

    Returns ``{"private": [folders made private], "proc": "own" | "hidden" | reason, ...}``.
    """
    lc = libc()
    report: dict = {"private": []}
    if not _mount(lc, None, "/", None, _MS_REC | _MS_PRIVATE):
        report["error"] = _err("making mounts private")
        return report
    writable = os.path.realpath(writable)
    keep = _outermost(keep + [writable])
    hidden = list(PRIVATE_DIRS) + [(h, 16, "0755") for h in dict.fromkeys(homes)
                                   if not any(h == d for d, _, _ in PRIVATE_DIRS)]
    for folder, size_mb, mode in hidden:
        if os.path.islink(folder) or not os.path.isdir(folder) or folder == "/":
            continue
        inside = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in keep if _under(p, folder)]
        try:
            if any(p == folder for p, _ in inside):
                continue                  # the project is the folder itself: leave it shared
            if not _mount(lc, "tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV,
                          f"size={size_mb}m,mode={mode}"):
                report.setdefault("failed", []).append(_err(folder))
                continue
            report["private"].append(folder)
            for path, fd in inside:       # bind what the case needs back in place
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.makedirs(path, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    open(path, "a").close()
                if not _mount(lc, f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC):
                    report["error"] = _err(f"binding {path}")
                elif not _under(writable, path) and not _mount(
                        lc, None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY):
                    report["error"] = _err(f"making {path} read-only")
        finally:
            for _, fd in inside:
                os.close(fd)
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _mount(lc, "proc", "/proc", "proc", flags):
        report["proc"] = "own"
    else:
        why = _err("fresh proc mount")
        # an empty /proc is better than the caller's: no other process can be read
        report["proc"] = "hidden" if _mount(lc, "tmpfs", "/proc", "tmpfs", flags, "size=1m") else why
        report["proc_note"] = why
    return report
