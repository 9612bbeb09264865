"""Files gpufs writes and reads: what may be replaced, with which permissions, and how much is
read.

Owns three rules shared by ``save_model`` / ``load_model`` (``gpufs.io.model_io``) and the command
line (``gpufs.cli``):

* only a regular file is ever replaced or read as a model: a FIFO, a device, a socket or a
  folder (also behind a symbolic link) is named and refused, never replaced (``--force`` as
  root would otherwise replace ``/dev/null``) and never opened for a blocking read (a FIFO
  without a writer would hang the reader);
* a written file gets the permissions the target had, or those the umask gives a new file
  (``tempfile.mkstemp`` makes every temporary file 0600);
* a read is bounded: at most ``max_bytes + 1`` bytes of the file's size are read.
"""

from __future__ import annotations

import os
import stat

__all__ = ["new_file_mode", "read_regular", "special_kind"]

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind_of(mode) -> str | None:
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def special_kind(path) -> str | None:
    """What an existing path is when it is not a regular file ("a FIFO (named pipe)", "a
    character device", "a folder", ...; links followed), else None (a regular file, or no
    file: a dangling link included).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    str or None
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    return _kind_of(mode)


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (``os.umask`` sets
    it for a moment, which a thread creating a file at that moment would see)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(path) -> int:
    """The permission bits a file written to ``path`` gets: an existing regular file's own, or
    ``0o666`` less the umask for a new file (what ``open(path, "w")`` would give).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    int
    """
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        return stat.S_IMODE(st.st_mode)
    return 0o666 & ~_umask()


def read_regular(path, max_bytes: int, error):
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Opened without blocking (a FIFO without a writer would block ``open``), then refused
    unless it is a regular file.

    Parameters
    ----------
    path : str or path-like
    max_bytes : int
    error : callable
        ``error(message)`` returns the exception to raise for a file that is not a regular
        one, or one larger than ``max_bytes`` (the message names the path).

    Returns
    -------
    bytes
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.filename is None:
            exc.filename = name
        raise
    try:  # checked before the descriptor becomes a file object: fdopen of a folder raises
        st = os.fstat(fd)  # "Is a directory: 3", naming the descriptor, not the path
        kind = _kind_of(st.st_mode)
    except BaseException:
        os.close(fd)
        raise
    if kind is not None:
        os.close(fd)
        raise error(
            f"{name} is {kind}, not a file; gpufs reads model files from regular files only."
        )
    with os.fdopen(fd, "rb") as fh:
        # read(n) allocates n bytes up front: ask for the file's size, not the cap
        data = fh.read(min(st.st_size, max_bytes) + 1)
    if len(data) > max_bytes:
        raise error(
            f"{name} is larger than max_bytes={max_bytes}; a model file of a trusted "
            "source may be loaded with a larger max_bytes."
        )
    return data
