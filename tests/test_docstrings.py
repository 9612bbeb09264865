"""Docstrings for users: every public function, class and method of gpufs has the numpydoc
sections a reader needs (a docstring, every parameter documented and none invented, a Returns
section where something is returned), and no source text cites internal notes a user cannot
see (file numbers of papers, design files, issue numbers) instead of authors, title and venue.

Public means: defined in a module whose import path has no part starting with "_" (or listed
in such a module's ``__all__``), not starting with "_" itself. The two backends' methods are
documented once, in the ``gpufs.backends.base.Backend`` protocol they implement.
"""

import importlib
import inspect
import os
import pkgutil
import re

import pytest

import gpufs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: numpydoc validation codes enforced: no docstring, undocumented / unknown parameters, no
#: Returns section for a function that returns something.
CODES = ("GL08", "PR01", "PR02", "RT01")
#: Methods documented elsewhere: the backends implement the Backend protocol's docstrings.
PROTOCOL_IMPLEMENTATIONS = (
    "gpufs.backends.cpu.backend.CPUBackend",
    "gpufs.backends.gpu.backend.GPUBackend",
)


def _public_modules():
    names = ["gpufs"]
    for info in pkgutil.walk_packages(gpufs.__path__, "gpufs."):
        parts = info.name.split(".")[1:]
        if not any(p.startswith("_") for p in parts) and info.name != "gpufs.cli":
            names.append(info.name)  # gpufs.cli: the command line documents its options
    return names


def _is_public_home(module_name):
    return not any(p.startswith("_") for p in module_name.split(".")[1:])


def _public_objects():
    """Qualified names of every public function, class and method (inherited gpufs methods
    of the exported classes included)."""
    found = set()
    for m in _public_modules():
        mod = importlib.import_module(m)
        exported = list(getattr(mod, "__all__", []))
        names = exported or [n for n in dir(mod) if not n.startswith("_")]
        for n in names:
            obj = getattr(mod, n, None)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            home = getattr(obj, "__module__", "")
            if not home.startswith("gpufs") or (not _is_public_home(home) and n not in exported):
                continue
            qual = f"{home}.{obj.__qualname__}"
            found.add(qual)
            if not inspect.isclass(obj) or qual in PROTOCOL_IMPLEMENTATIONS:
                continue
            for an in dir(obj):
                owner = next((k for k in obj.__mro__ if an in vars(k)), None)
                if an.startswith("_") or owner is None or not owner.__module__.startswith("gpufs"):
                    continue
                a = vars(owner)[an]
                if inspect.isfunction(a) or isinstance(a, (property, classmethod, staticmethod)):
                    found.add(f"{owner.__module__}.{owner.__qualname__}.{an}")
    return sorted(found)


def test_every_public_object_has_the_numpydoc_sections():
    validate = pytest.importorskip("numpydoc.validate").validate
    objects = _public_objects()
    assert len(objects) > 200  # the walk found the package, not a handful of names
    problems = []
    for qual in objects:
        for code, message in validate(qual)["errors"]:
            if code not in CODES:
                continue
            if code == "PR01" and message.endswith(
                ("{'*args', '**kwargs'} not documented", "{'**kwargs', '*args'} not documented")
            ):
                continue  # a Protocol class: its "parameters" are typing's, not the user's
            problems.append(f"{qual}: {code} {message}")
    assert not problems, f"{len(problems)} docstring problems:\n" + "\n".join(problems)


_INTERNAL = re.compile(
    r"paper \d{3}\b|\b\d{3}_[0-9a-f]{16}\b|DESIGN\.md|shared/papers|"
    r"\bProblem \d|\bissue\s*#?\d+",
    re.IGNORECASE,
)


def test_sources_cite_papers_not_internal_notes():
    found = []
    for folder in ("gpufs", "cuda_kernels"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if not f.endswith(".py"):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    for no, line in enumerate(fh, 1):
                        if _INTERNAL.search(line):
                            found.append(f"{os.path.relpath(path, ROOT)}:{no}: {line.strip()}")
    assert not found, "internal references:\n" + "\n".join(found)


def test_the_internal_reference_pattern_catches_what_it_should():
    for text in (
        "see paper 002",
        "DESIGN.md section 4",
        "their Problem 2",
        "issue #12",
        "(issue 7)",
        "000_a70f9b5478119bbd.txt",
    ):
        assert _INTERNAL.search(text), text
    for text in ("Xu et al., KDD 2014", "section 4.2.1", "an issue with NaN", "Algorithm 2"):
        assert not _INTERNAL.search(text), text
