"""Keep the grading child's signals to itself and its hands off the file system (Linux: seccomp).

The learner's code runs in the forked grading child as the same user as the notebook, so
without this it could ``os.kill(os.getppid(), signal.SIGINT)`` (``steps.check`` raises
KeyboardInterrupt in the notebook), SIGSTOP the notebook for good, or SIGKILL it.  No Python
handler can refuse SIGSTOP or SIGKILL, so the refusal is the kernel's: before the learner's code
runs, the child installs a seccomp filter (inherited by everything it starts) under which

* ``kill`` reaches only the child itself or its own process group (``pid`` = its pid, 0, or
  minus its pid: the child leads its group);
* ``tgkill``, ``tkill``, ``rt_sigqueueinfo`` and ``rt_tgsigqueueinfo`` reach only the child's
  own threads;
* ``pidfd_send_signal``, ``ptrace`` and ``process_vm_writev`` (another process's memory) fail;
* ``setpgid`` and ``setsid`` fail (the child stays in its own group, so ``kill(0)`` stays in
  it, and the group's kill at the end reaches everything it started);
* ``fcntl`` ``F_SETOWN``/``F_SETOWN_EX``/``F_SETSIG`` and ``ioctl`` ``FIOSETOWN``/``SIOCSPGRP``
  fail (they make the kernel send another process SIGIO, or a signal of the caller's choice);
* no file is written, created, renamed, linked, removed or re-permissioned: ``open`` and
  ``openat`` with a writing or creating flag (``O_WRONLY``, ``O_RDWR``, ``O_CREAT``,
  ``O_TRUNC``, ``O_APPEND``) fail, and so do ``creat``, ``truncate``, ``rename*``, ``link*``,
  ``symlink*``, ``unlink*``, ``mkdir*``, ``rmdir``, ``mknod*``, ``chmod``/``fchmodat``, and the
  calls whose arguments a filter cannot read (``openat2``, ``open_by_handle_at``,
  ``io_uring_setup``).  The parent trusts files the child could otherwise forge: the census
  cache (a row keyed by a kernel's source, whose float64 count of 0 would pass a kernel that
  computes in float64), the progress file, the notebooks.  The child writes only to the
  pipes it was handed;

each refusal is ``EPERM``, which Python raises as ``PermissionError``.  Every other system call
is untouched (reads, and writes to file descriptors already open).  The child also gives up
its capabilities, and while a grading child lives the parent (the notebook) is non-dumpable (:func:`guard_parent`), so the child cannot open
``/proc/<parent>/mem``.  :func:`confine` installs nothing (it returns False) where there is no
Linux ``prctl`` or on an architecture whose system-call numbers are not listed here: there the
child's signals are not confined.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import struct
import sys

# (audit arch, {name: number}) of the architectures a filter is written for
_ARCHES = {
    "x86_64": (0xC000003E, {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
                            "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424, "ptrace": 101,
                            "process_vm_writev": 311, "setpgid": 109, "setsid": 112,
                            "fcntl": 72, "ioctl": 16,
                            # the file system
                            "open": 2, "openat": 257, "creat": 85, "openat2": 437,
                            "open_by_handle_at": 304, "io_uring_setup": 425, "truncate": 76,
                            "rename": 82, "renameat": 264, "renameat2": 316, "link": 86,
                            "linkat": 265, "symlink": 88, "symlinkat": 266, "unlink": 87,
                            "unlinkat": 263, "mkdir": 83, "mkdirat": 258, "rmdir": 84,
                            "mknod": 133, "mknodat": 259, "chmod": 90, "fchmodat": 268}),
    "aarch64": (0xC00000B7, {"kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
                             "rt_tgsigqueueinfo": 240, "pidfd_send_signal": 424, "ptrace": 117,
                             "process_vm_writev": 271, "setpgid": 154, "setsid": 157,
                             "fcntl": 25, "ioctl": 29,
                             # the file system (aarch64 has only the *at calls)
                             "openat": 56, "openat2": 437, "open_by_handle_at": 265,
                             "io_uring_setup": 425, "truncate": 45, "renameat": 38,
                             "renameat2": 276, "linkat": 37, "symlinkat": 36, "unlinkat": 35,
                             "mkdirat": 34, "mknodat": 33, "fchmodat": 53}),
}
# open flags that write or create: O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND (the same bits
# on both architectures)
_WRITE_FLAGS = 0x1 | 0x2 | 0x40 | 0x200 | 0x400
# calls that change the file system whatever their arguments
_FS_CHANGES = ("creat", "openat2", "open_by_handle_at", "io_uring_setup", "truncate", "rename",
               "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink",
               "unlinkat", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat", "chmod", "fchmodat")
# fcntl and ioctl commands that name a process to be sent signals (SIGIO, or F_SETSIG's choice)
_F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 8, 10, 15
_FIOSETOWN, _SIOCSPGRP = 0x8901, 0x8902
_X32_BIT = 0x40000000  # x86_64's x32 numbers: refused outright (nothing here uses them)

# classic BPF, as seccomp reads it
_LD_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ALLOW = 0x7FFF0000
_EPERM = 0x00050000 | 1
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets into struct seccomp_data (arg0's low word)
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_PR_SET_DUMPABLE = 4


def _program(arch: int, numbers: dict, pid: int) -> list[tuple]:
    """The filter, as (code, jt, jf, k) instructions."""
    prog = [(_LD_ABS, 0, 0, _ARCH), (_JEQ, 1, 0, arch), (_RET, 0, 0, _ALLOW),
            (_LD_ABS, 0, 0, _NR)]
    if arch == _ARCHES["x86_64"][0]:
        prog += [(_JSET, 0, 1, _X32_BIT), (_RET, 0, 0, _EPERM)]

    def only(*targets):  # arg0 must be one of targets, else EPERM
        block = [(_LD_ABS, 0, 0, _ARG0)]
        for t in targets:
            block += [(_JEQ, 0, 1, t & 0xFFFFFFFF), (_RET, 0, 0, _ALLOW)]
        return block + [(_RET, 0, 0, _EPERM)]

    def never(*commands):  # arg1 (a command) must be none of commands, else EPERM
        block = [(_LD_ABS, 0, 0, _ARG0 + 8)]
        for c in commands:
            block += [(_JEQ, 0, 1, c), (_RET, 0, 0, _EPERM)]
        return block + [(_RET, 0, 0, _ALLOW)]

    def reads_only(arg: int):  # the open flags in argument ``arg`` must not write, else EPERM
        return [(_LD_ABS, 0, 0, _ARG0 + 8 * arg), (_JSET, 0, 1, _WRITE_FLAGS),
                (_RET, 0, 0, _EPERM), (_RET, 0, 0, _ALLOW)]

    refuse = [(_RET, 0, 0, _EPERM)]
    rules = {"kill": only(pid, 0, -pid), "tkill": only(pid), "tgkill": only(pid),
             "rt_sigqueueinfo": only(pid), "rt_tgsigqueueinfo": only(pid),
             "pidfd_send_signal": refuse, "ptrace": refuse, "process_vm_writev": refuse,
             # the group is the child's for good: kill(0) then stays in it
             "setpgid": refuse, "setsid": refuse,
             "fcntl": never(_F_SETOWN, _F_SETSIG, _F_SETOWN_EX),
             "ioctl": never(_FIOSETOWN, _SIOCSPGRP),
             # files are read, never written: open(path, flags), openat(dir, path, flags)
             "open": reads_only(1), "openat": reads_only(2),
             **{name: refuse for name in _FS_CHANGES}}
    for name, block in rules.items():
        if name not in numbers:  # aarch64 has no open, rename, ...
            continue
        # a block ends in a return; the jump skips it for every other call
        prog += [(_JEQ, 0, len(block), numbers[name])] + block
    prog.append((_RET, 0, 0, _ALLOW))
    return prog


_guarded = [0]  # grading children alive


def guard_parent() -> None:
    """Before forking a grading child: make this process (the notebook) non-dumpable, so a
    process of the same user without CAP_SYS_PTRACE cannot open its ``/proc/<pid>/mem`` (a
    fork knows every address of its parent); undone by :func:`release_parent` when the last
    child is gone."""
    if _prctl(_PR_SET_DUMPABLE, 0) is not None:
        _guarded[0] += 1


def release_parent() -> None:
    if _guarded[0] > 0:
        _guarded[0] -= 1
        if _guarded[0] == 0:
            _prctl(_PR_SET_DUMPABLE, 1)


@functools.cache
def _libc():
    """The C library with ``prctl`` declared, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                               ctypes.c_ulong]
    except (OSError, AttributeError):
        return None
    return libc


def _prctl(option: int, a: int, b: int = 0):
    """prctl(option, a, b), or None where there is none."""
    libc = _libc()
    return None if libc is None else libc.prctl(option, a, b, 0, 0)


def confine() -> bool:
    """Install the filter in this process (the grading child, before the learner's code runs);
    whether it was installed."""
    found = _ARCHES.get(platform.machine())
    libc = _libc()
    if found is None or libc is None:
        return False
    prog = _program(*found, os.getpid())
    raw = b"".join(struct.pack("<HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    _drop_capabilities(libc)
    if _prctl(_PR_SET_NO_NEW_PRIVS, 1) != 0:
        return False
    return _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog)) == 0


def _drop_capabilities(libc) -> None:
    """Give up every capability (a root notebook's child would keep CAP_SYS_PTRACE, which
    opens a non-dumpable parent's memory anyway)."""
    class _Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    try:
        libc.capset(ctypes.byref(_Header(0x20080522, 0)), ctypes.byref((_Data * 2)()))
    except AttributeError:
        pass
