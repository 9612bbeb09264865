"""Text a newcomer can trust: every module of gpufs starts with a docstring of at most 15 lines
that says what it owns (the longer reasons live in ``docs/module_notes.rst``), and
CONTRIBUTING.md's module -> test table names every module.
"""

import ast
import fnmatch
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 15

#: Modules whose docstrings are still longer, owned by work in progress on the engines and the
#: cluster (``gpufs/backends/``, ``cuda_kernels/``, ``gpufs/dask/``). Remove a name when its
#: docstring is trimmed; the test fails on a name listed here that already fits.
KNOWN_LONG = {
    "gpufs/dask/__init__.py",
    "gpufs/dask/_backend.py",
    "gpufs/dask/_controlburn.py",
    "cuda_kernels/__init__.py",
    "cuda_kernels/histogram.py",
    "cuda_kernels/objective.py",
    "cuda_kernels/partition.py",
    "cuda_kernels/predict.py",
    "cuda_kernels/split.py",
}


def _module_files():
    """Every module of the package, as paths relative to the checkout (the CUDA kernels at
    their home, ``cuda_kernels/``, not through the ``gpufs/cuda_kernels`` link)."""
    files = [
        p
        for p in glob.glob(os.path.join(ROOT, "gpufs", "**", "*.py"), recursive=True)
        if os.sep + "cuda_kernels" + os.sep not in p
    ]
    files += glob.glob(os.path.join(ROOT, "cuda_kernels", "*.py"))
    return sorted(os.path.relpath(p, ROOT).replace(os.sep, "/") for p in files)


def _docstring_lines(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        doc = ast.get_docstring(ast.parse(fh.read()), clean=False)
    return None if doc is None else len(doc.strip("\n").splitlines())


def test_every_module_says_in_at_most_15_lines_what_it_owns():
    files = _module_files()
    assert len(files) > 90  # the walk found the package
    lengths = {p: _docstring_lines(p) for p in files}
    missing = [p for p, n in lengths.items() if n is None]
    assert not missing, f"modules without a docstring: {missing}"
    too_long = {p: n for p, n in lengths.items() if n > MAX_LINES and p not in KNOWN_LONG}
    assert not too_long, (
        f"module docstrings over {MAX_LINES} lines (move the essay to "
        f"docs/module_notes.rst): {too_long}"
    )
    fixed = sorted(p for p in KNOWN_LONG if lengths.get(p, 0) <= MAX_LINES)
    assert not fixed, f"KNOWN_LONG lists modules that now fit or are gone: {fixed}"


def test_contributing_names_the_tests_of_every_module():
    with open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8") as fh:
        text = fh.read()
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", text, re.M)
    patterns = [p for first, _ in rows for p in re.findall(r"`([^`]+)`", first)]
    tests = [t for _, second in rows for t in re.findall(r"`(test_\w+)`", second)]
    assert patterns and tests
    for t in tests:  # every test file named exists
        assert os.path.exists(os.path.join(ROOT, "tests", t + ".py")), t
    unlisted = []
    for path in _module_files():
        name = path[len("gpufs/") :] if path.startswith("gpufs/") else path
        name = name[: -len(".py")]  # a package is its "__init__": lasso/__init__
        if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            unlisted.append(name)
    assert not unlisted, f"modules missing from CONTRIBUTING.md's test table: {unlisted}"
