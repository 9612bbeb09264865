"""The documentation: the Sphinx site builds with warnings as errors, and every example in the
docs pages and in gpufs's docstrings runs and prints what it shows (doctest).

The build is skipped only where the docs toolchain (Sphinx, numpydoc) is not installed; the
``test`` extra installs it, so CI builds the docs.
"""
import doctest
import glob
import importlib
import os
import pkgutil
import re
import subprocess
import sys

import pytest

import gpufs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
PAGES = sorted(glob.glob(os.path.join(DOCS, "**", "*.rst"), recursive=True))


def test_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q",
                           "-b", "html", DOCS, str(tmp_path / "html")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = {os.path.relpath(p, tmp_path / "html") for p in
             glob.glob(str(tmp_path / "html" / "**" / "*.html"), recursive=True)}
    expected = {os.path.relpath(p, DOCS)[:-4] + ".html" for p in PAGES}
    assert expected <= built
    # Readers get papers by author, title and venue, never an internal file name or note.
    internal = re.compile(r"paper \d{3}\b|DESIGN\.md|shared/papers")
    for page in sorted(built):
        with open(tmp_path / "html" / page, encoding="utf-8") as fh:
            found = internal.findall(fh.read())
        assert not found, f"{page} cites {sorted(set(found))}"


@pytest.mark.parametrize("page", [os.path.relpath(p, DOCS) for p in PAGES])
def test_docs_page_examples(page, monkeypatch, tmp_path):
    pytest.importorskip("pandas")  # the examples load data sets as DataFrames
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    result = doctest.testfile(os.path.join(DOCS, page), module_relative=False,
                              optionflags=FLAGS, verbose=False, report=True)
    assert result.failed == 0


def test_quick_start_teaches_with_examples():
    with open(os.path.join(DOCS, "quickstart.rst")) as fh:
        examples = doctest.DocTestParser().get_examples(fh.read())
    assert len(examples) >= 10  # and test_docs_page_examples runs every one of them


def _gpufs_modules():
    names = ["gpufs"]
    for info in pkgutil.walk_packages(gpufs.__path__, "gpufs."):
        if info.name != "gpufs.__main__":  # running it would start the command line
            names.append(info.name)
    return names


def test_docstring_examples(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=FLAGS)
    attempted = []
    for name in _gpufs_modules():
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            if test.examples:
                runner.run(test)
                attempted.append(test.name)
    results = runner.summarize(verbose=False)
    assert attempted, "no docstring example found"
    assert results.failed == 0
