"""The import graph of gpufs has no cycle, at any depth, function-level imports included.

Every module under ``gpufs/`` is parsed with ``ast`` (not imported, so a lazy import inside a
function counts like one at the top); ``import gpufs.x`` and ``from .x import y`` (relative
imports resolved against the module's package) give an edge to the module they name, and
``from . import x`` to the submodule ``x``. Importing a submodule also runs its parent
package's ``__init__``, but a package's own ``__init__`` always runs first, so those implicit
parent edges are not counted. A cycle is a strongly connected component of more than one
module.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Cycles tolerated for now, by their sorted module names (none today). Add one only for code
#: that a change may not touch, and say why beside it.
KNOWN_CYCLES = {}


def _modules(root, package):
    """module name -> path, for every .py file of ``package`` under ``root``."""
    out = {}
    # followlinks: a checkout links gpufs/cuda_kernels to the top-level cuda_kernels/
    for folder, dirs, files in os.walk(os.path.join(root, package), followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def _resolve(module, is_package, level, name):
    """The absolute name of a relative import ``from <level dots><name> import ...``."""
    if level == 0:
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def import_graph(root, package):
    """module -> set of the package's modules it imports (anywhere in its source)."""
    modules = _modules(root, package)

    def known(name):  # the module itself, or the nearest enclosing one that exists
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in modules else None

    graph = {}
    for m, path in modules.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(known(a.name) for a in node.names if a.name.split(".")[0] == package)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(m, path.endswith("__init__.py"), node.level, node.module)
                if not base or base.split(".")[0] != package:
                    continue
                for a in node.names:  # "from . import x" names the submodule x
                    sub = f"{base}.{a.name}"
                    targets.add(sub if sub in modules else known(base))
        graph[m] = {t for t in targets if t is not None and t != m}
    return graph


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_gpufs_has_no_import_cycle():
    graph = import_graph(ROOT, "gpufs")
    assert len(graph) > 80 and "gpufs.io.model_io" in graph  # the walk found the package
    assert "gpufs.io.model_io" in graph["gpufs.selectors._base"]
    found = cycles(graph)
    unexpected = [c for c in found if c not in KNOWN_CYCLES]
    assert not unexpected, "import cycles: " + "; ".join(" <-> ".join(c) for c in unexpected)
    stale = [c for c in KNOWN_CYCLES if c not in found]
    assert not stale, f"KNOWN_CYCLES lists cycles that are gone: {stale}"


def test_the_backends_import_no_engine_module():
    # The kernels live in the backends and the algorithms import them, never the reverse
    # (issue 28: the group-testing kernels moved out of gpufs/engine/group_testing.py).
    graph = import_graph(ROOT, "gpufs")
    backends = [m for m in graph if m == "gpufs.backends" or m.startswith("gpufs.backends.")]
    assert "gpufs.backends.cpu.group_testing" in backends
    assert "gpufs.backends.cpu.group_testing" in graph["gpufs.engine.group_testing"]
    upward = {
        m: sorted(
            t
            for t in graph[m]
            if t
            in (
                "gpufs.engine.group_testing",
                "gpufs.engine.grower",
                "gpufs.engine.boosting",
                "gpufs.engine.penalties",
            )
        )
        for m in backends
    }
    assert not {m: t for m, t in upward.items() if t}, upward


@pytest.mark.parametrize(
    "body, expect",
    [
        # a cycle through a function-level, relative import two levels deep
        (
            {
                "__init__": "",
                "a": "from . import b\n",
                "b": "def f():\n    from .sub import c\n",
                "sub/__init__": "",
                "sub/c": "from ..a import x\n",
            },
            [("pkg.a", "pkg.b", "pkg.sub.c")],
        ),
        # the same modules without the closing edge: no cycle
        (
            {
                "__init__": "",
                "a": "from . import b\n",
                "b": "def f():\n    from .sub import c\n",
                "sub/__init__": "",
                "sub/c": "import numpy\n",
            },
            [],
        ),
        # an absolute import of a submodule's attribute closes a cycle of two
        (
            {"__init__": "", "a": "import pkg.b\n", "b": "from pkg.a import name\n"},
            [("pkg.a", "pkg.b")],
        ),
    ],
)
def test_the_walk_finds_cycles(tmp_path, body, expect):
    for name, text in body.items():
        path = tmp_path / "pkg" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert cycles(import_graph(str(tmp_path), "pkg")) == expect


def test_the_gpu_backend_imports_nothing_of_the_cpu_backend():
    # backends/gpu/ mirrors backends/cpu/ and stands beside it: what both need lives in
    # gpufs/rules/, gpufs._types or backends/base (issue 38).
    graph = import_graph(ROOT, "gpufs")
    gpu = [m for m in graph if m.startswith("gpufs.backends.gpu")]
    assert "gpufs.backends.gpu.backend" in gpu and "gpufs.backends.gpu.device" in gpu
    cpu = {m: sorted(t for t in graph[m] if t.startswith("gpufs.backends.cpu")) for m in gpu}
    assert not {m: t for m, t in cpu.items() if t}, cpu


def test_the_package_root_keeps_at_most_15_modules():
    # issue 38: the root holds the public face, the process-wide runtime and the few modules
    # every layer uses; the rest lives in folders by layer (docs/architecture.rst)
    root = sorted(f for f in os.listdir(os.path.join(ROOT, "gpufs")) if f.endswith(".py"))
    assert len(root) <= 15, root
