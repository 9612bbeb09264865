"""The command line's files: reading the input table, and writing outputs without destroying
data.

Owns the table formats and compressions ``gpufs select`` reads and writes, the checks that run
before any fit (no output names an input or another output, an existing file is replaced only
with ``--force``, the folder is writable), and the write itself: into a temporary file beside
the target, published by one rename (``atomic_output``), so an interrupted run leaves the old
file or none. Also the terminal-safe text of messages and names (``printable``). The commands
are ``gpufs.cli``'s.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager

from ._interrupt import _to_remove, deferred

_COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd", ".zip": "zip"}
_TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}


class UserError(Exception):
    """A mistake in the command (not a bug): reported as one ``error:`` line, exit status 2."""


#: exceptions that mean "the input or the options are wrong": the estimators raise ValueError
#: and TypeError for bad data and hyperparameters, files raise OSError.
_USER_ERRORS = (UserError, ValueError, TypeError, OSError, ImportError, MemoryError)


# --- tables ---------------------------------------------------------------------------------
def table_format(path: str) -> tuple[str, str | None]:
    """The format of a table file from its name's extension.

    CSV and TSV may be compressed (``.csv.gz``, ``.tsv.zst``, ...); Parquet compresses inside.

    Parameters
    ----------
    path : str
        A file name; only its extensions are read.

    Returns
    -------
    format : {"csv", "tsv", "parquet"}
    compression : {"gzip", "bz2", "xz", "zstd", "zip"} or None

    Raises
    ------
    UserError
        For any other extension.

    Examples
    --------
    >>> table_format("data.csv")
    ('csv', None)
    >>> table_format("runs/2024.TSV.gz")
    ('tsv', 'gzip')
    >>> table_format("features.parquet")
    ('parquet', None)
    """
    name = os.path.basename(path).lower()
    root, ext = os.path.splitext(name)
    compression = _COMPRESSIONS.get(ext)
    if compression is not None:
        root, ext = os.path.splitext(root)
    fmt = _TABLE_FORMATS.get(ext)
    if fmt is None or (fmt == "parquet" and compression is not None):
        raise UserError(
            f"{path}: unknown table format; use a .csv, .tsv (optionally .gz, .bz2, "
            ".xz, .zst or .zip) or .parquet file name"
        )
    return fmt, compression


def _pandas():
    try:
        import pandas as pd
    except ImportError:
        raise UserError(
            "gpufs select reads and writes tables with pandas: "
            "pip install pandas pyarrow (or the checkout's '.[cli]' extra)"
        ) from None
    return pd


def read_table(path: str):
    """The table at ``path`` as a pandas DataFrame (Parquet through pyarrow)."""
    pd = _pandas()
    fmt, compression = table_format(path)
    if not os.path.exists(path):
        raise UserError(f"no such file: {path}")
    if os.path.isdir(path):
        raise UserError(f"{path} is a folder, not a table")
    from ..io._files import special_kind

    kind = special_kind(path)  # a FIFO without a writer would block open() for ever
    if kind is not None:
        raise UserError(f"{path} is {kind}, not a file; gpufs reads tables from regular files only")
    try:
        if fmt == "parquet":
            _need_pyarrow()
            return pd.read_parquet(path, engine="pyarrow")
        return pd.read_csv(path, sep="\t" if fmt == "tsv" else ",", compression=compression)
    except (UserError, OSError):
        raise
    except Exception as exc:  # parsers raise their own types (ParserError, ArrowInvalid, ...)
        raise UserError(f"could not read {path} as {fmt}: {_one_line(exc)}") from exc


def _need_pyarrow():
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UserError(
            "Parquet files need pyarrow: pip install pyarrow (or the checkout's '.[cli]' extra)"
        ) from None


def _write_table(df, path: str, fh) -> None:
    fmt, compression = table_format(path)
    if fmt == "parquet":
        _need_pyarrow()
        df.to_parquet(fh, engine="pyarrow", index=False)
    else:
        df.to_csv(
            fh, sep="\t" if fmt == "tsv" else ",", index=False, compression=compression or None
        )


# --- never destroy data ---------------------------------------------------------------------
def _same_file(a: str, b: str) -> bool:
    """True when a and b name one file: the same path after resolving links, or hard links."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def check_outputs(outputs: dict, inputs: list, force: bool) -> None:
    """Refuse, before any work, every output that would destroy data or cannot be written.

    ``outputs`` maps an option name (``--output``) to its path (or None); ``inputs`` are the
    files read. An output may not be an input, another output, or an existing file (unless
    ``force``), and its folder must exist.
    """
    seen = {}
    for option, path in outputs.items():
        if path is None:
            continue
        for src in inputs:
            if _same_file(path, src):
                raise UserError(
                    f"{option} {path} is the input file {src}; refusing to write "
                    "over the input (choose another output path)"
                )
        for other_option, other in seen.items():
            if _same_file(path, other):
                raise UserError(f"{option} and {other_option} name the same file {path}")
        seen[option] = path
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UserError(f"{option} {path}: the folder {folder} does not exist")
        if os.path.isdir(path):
            raise UserError(f"{option} {path} is a folder")
        _refuse_special(option, path)
        if os.path.lexists(path) and not force:
            raise UserError(
                f"{option} {path} exists; refusing to replace it (pass --force to overwrite)"
            )


def _refuse_special(option: str, path: str) -> None:
    """Only regular files are replaced, also with ``--force``: a FIFO, a device or a socket
    (behind a link too) is named and refused (``os.replace`` would put a file in its place:
    as root, ``--report /dev/null --force`` replaced ``/dev/null``)."""
    from ..io._files import special_kind

    kind = special_kind(path)
    if kind is not None:
        raise UserError(
            f"{option} {path} is {kind}, not a file; gpufs writes regular files "
            "only, and never replaces anything else (not even with --force)"
        )


#: the module each compression of a written table needs (pandas imports it when writing)
_COMPRESSION_MODULES = {
    "gzip": ("gzip", None),
    "bz2": ("bz2", None),
    "xz": ("lzma", None),
    "zstd": ("zstandard", "pip install zstandard"),
    "zip": ("zipfile", None),
}


def _probe_outputs(outputs: dict) -> None:
    """What check_outputs cannot see from names, found before the fit: every output's folder
    takes a new file (a temporary file is made there and removed), and a compressed or Parquet
    table has the library that writes it."""
    import importlib

    for option, path in outputs.items():
        if path is None:
            continue
        try:
            with deferred():  # the probe file never outlives an interrupt
                probe = _temporary_beside(path)
                os.unlink(probe)
                _to_remove.discard(probe)
        except OSError as exc:
            raise UserError(
                f"{option} {path}: cannot write in the folder "
                f"{os.path.dirname(os.path.abspath(path))} ({exc.strerror or exc})"
            ) from exc
        if option != "--output":
            continue
        fmt, compression = table_format(path)
        if fmt == "parquet":
            _need_pyarrow()
        module, advice = _COMPRESSION_MODULES.get(compression, (None, None))
        if module is not None:
            try:
                importlib.import_module(module)
            except ImportError:
                raise UserError(
                    f"{option} {path}: writing {compression} needs the {module} "
                    f"module ({advice or 'this Python was built without it'})"
                ) from None


def _temporary_beside(path: str) -> str:
    """A new empty file in ``path``'s folder (same file system, so a rename is atomic)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".part")
    _to_remove.add(tmp)  # a second signal's immediate exit removes it (gpufs.cli._interrupt)
    os.close(fd)
    return tmp


def _publish(tmp: str, path: str, force: bool) -> None:
    """Move the finished ``tmp`` to ``path`` in one step.

    Without ``force`` it refuses to replace a file that appeared since the checks (a hard link
    is made, which fails on an existing name). A new file gets the permissions the process's
    umask gives; a replaced file keeps its own.
    """
    from ..io._files import new_file_mode

    os.chmod(tmp, new_file_mode(path))
    if force:
        _refuse_special("the output", path)  # appeared since the checks
        os.replace(tmp, path)
        return
    appeared = UserError(
        f"{path} appeared while gpufs was running; refusing to replace it "
        "(pass --force to overwrite)"
    )
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise appeared from None
    except OSError:  # a file system without hard links: check, then rename
        if os.path.lexists(path):
            raise appeared from None
        os.replace(tmp, path)
    else:
        os.unlink(tmp)


@contextmanager
def atomic_output(path: str, force: bool, binary: bool = True):
    """Yield a handle to a temporary file in ``path``'s folder; when the block ends without an
    error, the file is synced and renamed to ``path``. On any error or interrupt the temporary
    file is removed and ``path`` is untouched.
    """
    tmp = None
    try:
        with deferred():  # no interrupt between making the file and knowing its name
            tmp = _temporary_beside(path)
        with open(tmp, "wb" if binary else "w") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _publish(tmp, path, force)
    finally:
        if tmp is not None:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            _to_remove.discard(tmp)


def write_json(obj, path: str, force: bool) -> None:
    """Strict JSON (no NaN or Infinity tokens) written through ``atomic_output``."""
    text = json.dumps(obj, indent=2, allow_nan=False) + "\n"
    with atomic_output(path, force, binary=False) as fh:
        fh.write(text)


def _one_line(exc: BaseException) -> str:
    text = printable(" ".join(str(exc).split()))
    return text or type(exc).__name__


def printable(text) -> str:
    r"""``text`` safe to print on a terminal: every character that is not printable (control
    characters such as ESC, BEL, CR and newlines, and invisible format characters such as
    U+202E, which reverses the text after it) is shown as its Python escape (``\x1b``).
    Names come from strangers' tables and model files.

    Parameters
    ----------
    text : object
        Converted with ``str``.

    Returns
    -------
    str

    Examples
    --------
    >>> print(printable("\x1b[31mred\nline"))
    \x1b[31mred\nline
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )
