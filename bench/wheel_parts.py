"""Carry a wheel too large for one device call (xgboost-cu13's 59 MB) in parts.

A device call carries at most 64 MiB, the working tree (about 14 MB) included, and folders
carried by an earlier call stay on the machine while it is warm. So a large wheel is split
here into parts, each in a folder of its own (``.whl-part1/``, ``.whl-part2/``, ...; git
ignores ``.whl*/``), the folders are carried over back-to-back calls, and the GPU machine
joins them (``bench_gpu_session.py`` does, before it installs the wheels)::

    python bench/wheel_parts.py split .whl-big/xgboost_cu13-3.3.0-*.whl --size-mb 20
    # call 1: carry [".whl", ".whl-part1"]; call 2 (while warm): [".whl-part2", ".whl-part3"]
    python bench/wheel_parts.py join --out /tmp/joined      # there; checks the sha256

Each part is ``<wheel>.partN-of-M``; the first folder also holds ``<wheel>.sha256``.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import sys

PART = re.compile(r"^(?P<wheel>.+\.whl)\.part(?P<i>\d+)-of-(?P<n>\d+)$")


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def split(wheel, size_mb=20.0, root=".", prefix=".whl-part"):
    """Write ``wheel`` as parts of at most ``size_mb`` MB, part i in ``root/<prefix>i/``;
    returns the part paths in order."""
    size = int(size_mb * 1e6)
    total = os.path.getsize(wheel)
    n = max(1, -(-total // size))
    name = os.path.basename(wheel)
    paths = []
    with open(wheel, "rb") as fh:
        for i in range(1, n + 1):
            folder = os.path.join(root, f"{prefix}{i}")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{name}.part{i}-of-{n}")
            with open(path, "wb") as out:
                out.write(fh.read(size))
            paths.append(path)
    with open(os.path.join(root, f"{prefix}1", f"{name}.sha256"), "w") as fh:
        fh.write(_sha256(wheel) + "\n")
    return paths


def join(root=".", out="/tmp/gpufs-joined", pattern=".whl*"):
    """Join every wheel whose parts are all in the folders ``root/<pattern>/``, checking
    the sha256 recorded at the split; returns the joined wheels' paths.

    Raises ValueError when a wheel's parts are incomplete or its checksum differs (a part
    from another split, or one cut short in transit): a broken wheel would install
    nothing, or something else."""
    parts = {}
    for path in glob.glob(os.path.join(root, pattern, "*.whl.part*")):
        m = PART.match(os.path.basename(path))
        if m:
            entry = parts.setdefault(m["wheel"], {"n": int(m["n"]), "paths": {}})
            entry["paths"][int(m["i"])] = path
    joined = []
    for wheel, entry in sorted(parts.items()):
        missing = sorted(set(range(1, entry["n"] + 1)) - set(entry["paths"]))
        if missing:
            raise ValueError(f"{wheel}: parts {missing} of {entry['n']} are not here")
        os.makedirs(out, exist_ok=True)
        target = os.path.join(out, wheel)
        with open(target, "wb") as fh:
            for i in range(1, entry["n"] + 1):
                with open(entry["paths"][i], "rb") as part:
                    fh.write(part.read())
        sums = glob.glob(os.path.join(root, pattern, f"{wheel}.sha256"))
        if not sums:
            raise ValueError(f"{wheel}: no .sha256 beside its first part")
        with open(sums[0]) as fh:
            want = fh.read().split()[0]
        if _sha256(target) != want:
            os.remove(target)
            raise ValueError(f"{wheel}: the joined parts do not match the split's sha256")
        joined.append(target)
    return joined


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("split", help="a wheel into part folders")
    sp.add_argument("wheel")
    sp.add_argument("--size-mb", type=float, default=20.0)
    sp.add_argument("--root", default=".")
    jp = sub.add_parser("join", help="the parts found under --root into --out")
    jp.add_argument("--root", default=".")
    jp.add_argument("--out", default="/tmp/gpufs-joined")
    args = ap.parse_args(argv)
    if args.cmd == "split":
        for path in split(args.wheel, args.size_mb, args.root):
            print(path, os.path.getsize(path))
    else:
        try:
            for path in join(args.root, args.out):
                print(path)
        except ValueError as exc:
            sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
