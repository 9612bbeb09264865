"""The documentation: the Sphinx site builds with warnings as errors and every reference
resolved (nitpicky), and every example runs as pasted: the doctests of the docs pages and of
gpufs's docstrings print what they show, and every code block of README.md and of the docs
pages runs (Python blocks each on its own; shell blocks of ``gpufs`` commands in a fresh
folder, after the page's doctests). Every example runs in this process (a shell block's
``gpufs`` commands through ``gpufs.cli.main``, its ``python -c`` through ``exec``): a new
interpreter per command would import numba and load every cached kernel again. Install
commands (pip, docker, pytest, sphinx) are the CI's own steps (``.ci/run``) and are not run
here.

The build is skipped only where the docs toolchain (Sphinx, numpydoc) is not installed; the
``test`` and ``docs`` extras install it, so CI builds the docs.
"""

import contextlib
import doctest
import glob
import importlib
import os
import pkgutil
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

import gpufs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
README = os.path.join(ROOT, "README.md")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
PAGES = sorted(glob.glob(os.path.join(DOCS, "**", "*.rst"), recursive=True))


# --- the code blocks of README.md and of the docs pages -------------------------------------
def _readme_blocks():
    """[(language, code)] of README.md's fenced blocks, in order."""
    with open(README, encoding="utf-8") as fh:
        text = fh.read()
    return [
        (m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)
    ]


def _rst_blocks(path):
    """[(language, code)] of a page's ``.. code-block::`` directives, in order."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"\s*\.\. code-block:: (\w+)", lines[i])
        i += 1
        if not m:
            continue
        while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith(":")):
            i += 1  # options, then the blank line
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            body.append(lines[i])
            i += 1
        blocks.append((m.group(1), textwrap.dedent("\n".join(body)).strip() + "\n"))
    return blocks


def _named(blocks, where, language):
    return [
        (f"{where}-{n}", code)
        for n, (lang, code) in enumerate((b for b in blocks if b[0] == language), 1)
    ]


#: the commands a shell block may hold: run here, or set up the environment (CI runs those)
_RUN = ("gpufs ", "python -c ")
_SETUP = ("python -m pip install ", "docker ", "python -m pytest", "python -m sphinx")


def _commands(code):
    """The shell block's commands: continuation lines joined, comments dropped."""
    joined = code.replace("\\\n", " ")
    return [
        line.split(" #")[0].strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _runnable(code):
    """True when every command of a shell block is one this test runs; False for a block of
    environment set-up. A command of neither kind is an example nobody checks: an error."""
    cmds = _commands(code)
    unknown = [c for c in cmds if not c.startswith(_RUN + _SETUP)]
    assert not unknown, f"a shell example this test can neither run nor skip: {unknown}"
    return all(c.startswith(_RUN) for c in cmds)


#: what only a shell could run, outside quotes: pipes, redirections, lists
_SHELL_ONLY = "|&;<>"


def _needs_a_shell(cmd):
    words = shlex.shlex(cmd, posix=True, punctuation_chars=_SHELL_ONLY)
    return any(w and set(w) <= set(_SHELL_ONLY) for w in words) or "$" in cmd or "`" in cmd


def _run_shell(code, cwd, monkeypatch):
    """Run a shell block's commands in this process, in order, in ``cwd``, as a reader would
    type them: ``gpufs ...`` through ``gpufs.cli.main`` (the console script's entry point),
    ``python -c CODE`` through ``exec``. A block that needs a real shell runs in bash."""
    cmds = _commands(code)
    if any(_needs_a_shell(c) for c in cmds):
        return _run_bash(code, cwd)
    from gpufs.cli import main

    monkeypatch.chdir(cwd)
    for cmd in cmds:
        argv = shlex.split(cmd)
        if argv[0] == "gpufs":
            try:
                status = main(argv[1:])
            except SystemExit as exc:  # argparse's --version and --help
                status = exc.code
            assert status in (0, None), f"{cmd}: exit status {status}"
        else:
            assert argv[:2] == ["python", "-c"] and len(argv) == 3, cmd
            exec(compile(argv[2], "<python -c>", "exec"), {"__name__": "__main__"})


def _run_bash(code, cwd):
    """Run a shell block with ``python`` and ``gpufs`` this checkout's, as a reader would."""
    prelude = 'python() { "$GPUFS_PY" "$@"; }\ngpufs() { "$GPUFS_PY" -m gpufs "$@"; }\nset -e\n'
    env = dict(os.environ, PYTHONPATH=ROOT, GPUFS_PY=sys.executable)
    proc = subprocess.run(
        ["bash", "-c", prelude + code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


def _run_python(code, cwd, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(cwd)
    try:
        exec(compile(code, "<example>", "exec"), {"__name__": "__example__"})
    finally:
        plt.close("all")


README_PYTHON = _named(_readme_blocks(), "README", "python")
README_SHELL = [
    (name, code) for name, code in _named(_readme_blocks(), "README", "bash") if _runnable(code)
]
PAGE_PYTHON = [b for p in PAGES for b in _named(_rst_blocks(p), os.path.relpath(p, DOCS), "python")]


@pytest.mark.parametrize(
    "name, code", README_PYTHON + PAGE_PYTHON, ids=[n for n, _ in README_PYTHON + PAGE_PYTHON]
)
def test_python_blocks_run_as_pasted(name, code, monkeypatch, tmp_path):
    """Each Python block of README.md and of the docs pages on its own, in a fresh folder: it
    defines everything it uses (no table.parquet nobody has, no X_train from elsewhere)."""
    pytest.importorskip("pandas")
    _run_python(code, tmp_path, monkeypatch)


@pytest.mark.parametrize("name, code", README_SHELL, ids=[n for n, _ in README_SHELL])
def test_readme_shell_blocks_run_as_pasted(name, code, tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    _run_shell(code, tmp_path, monkeypatch)


def test_every_example_is_checked():
    """The README's and the guides' examples are run by the tests above, and the shell blocks
    left out are environment set-up only."""
    assert len(README_PYTHON) >= 3 and len(README_SHELL) >= 1
    assert PAGE_PYTHON and any(n.startswith("guide/choosing.rst") for n, _ in PAGE_PYTHON)
    for lang, code in _readme_blocks() + [b for p in PAGES for b in _rst_blocks(p)]:
        assert lang in ("python", "bash", "text", ""), lang
        if lang == "bash":
            _runnable(code)  # asserts every command is either run or set-up


def test_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    env = dict(os.environ, PYTHONPATH=ROOT)
    # -n: nitpicky, every cross-reference must resolve (docs/conf.py sets it too)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-E",
            "-W",
            "-n",
            "--keep-going",
            "-q",
            "-b",
            "html",
            DOCS,
            str(tmp_path / "html"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = {
        os.path.relpath(p, tmp_path / "html")
        for p in glob.glob(str(tmp_path / "html" / "**" / "*.html"), recursive=True)
    }
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
    with contextlib.ExitStack() as stack:
        if page == os.path.join("guide", "dask.rst"):  # its Client() starts 2 workers
            from _forkserver_workers import workers_from_a_forkserver

            stack.enter_context(workers_from_a_forkserver())
        result = doctest.testfile(
            os.path.join(DOCS, page),
            module_relative=False,
            optionflags=FLAGS,
            verbose=False,
            report=True,
        )
    assert result.failed == 0
    # then the page's shell examples, in the same folder (they may read what it wrote)
    for _, code in _named(_rst_blocks(os.path.join(DOCS, page)), page, "bash"):
        if _runnable(code):
            pytest.importorskip("pyarrow")
            _run_shell(code, tmp_path, monkeypatch)


def test_the_docs_extra_is_small_and_named_in_the_readme():
    """``pip install ".[docs]"`` builds the docs: Sphinx and numpydoc on the core install,
    none of the heavy extras (the CUDA compiler wheels, cvxpy, lightgbm, dask)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[ ;]", r)[0].lower() for r in extras["docs"]}
    assert {"sphinx", "numpydoc"} <= names
    assert not names & {
        "numba-cuda",
        "nvidia-cuda-nvcc",
        "nvidia-cuda-nvdisasm",
        "cvxpy",
        "lightgbm",
        "dask",
        "cupy-cuda13x",
    }
    with open(README, encoding="utf-8") as fh:
        readme = fh.read()
    assert 'python -m pip install ".[docs]"' in readme


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


def test_no_page_installs_gpufs_from_the_package_index():
    """gpufs is not published: an install line naming "gpufs[...]" would fetch whatever a
    stranger published under that name. Pages install extras from the checkout (".[dask]")."""
    pages = [
        README,
        os.path.join(ROOT, "CONTRIBUTING.md"),
        *PAGES,
        *glob.glob(os.path.join(ROOT, "docker", "*.md")),
    ]
    found = []
    for path in pages:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if re.search(r"pip install\s+(-\S+\s+)*[\"']?gpufs\b", line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not found, found
