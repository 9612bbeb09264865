"""The buffer layouts shared by the GPU host code and its kernels are named once.

``gpufs/_types.py`` names every row, word and field of the buffers that ``gpufs.backends.gpu``
fills or reads and ``cuda_kernels`` reads or fills: the search scalars ``scal``, the control
words ``ctrl``, the build table ``bld``, the node table ``nodes``, the split table ``spl``,
the search's per-feature results ``pf_f`` / ``pf_i`` and the level's output buffer (``out``,
``out_i``, ``out_f``, its per-slot ``fields``). A bare number indexing one of them anywhere
else is a second, silent definition of the layout: these tests find one in the source (by
its syntax tree, so comments and docstrings may still say ``ctrl[0]``), and check that the
names are distinct and cover each buffer.
"""

import ast
import dataclasses
import os

import pytest

from gpufs import _types as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES = os.path.join("gpufs", "_types.py")

#: Buffers whose names mean the shared layouts everywhere in the package.
GLOBAL_BUFFERS = frozenset({"scal", "ctrl", "bld", "spl", "pf_f", "pf_i"})
#: Buffers whose names are generic ("out", "nodes"): they mean the shared layouts only in the
#: GPU host code and the kernels.
GPU_BUFFERS = GLOBAL_BUFFERS | {"nodes", "out", "out_i", "out_f", "fields"}
GPU_FOLDERS = ("cuda_kernels", os.path.join("gpufs", "backends", "gpu"))
#: ``cuda.atomic.<op>(buffer, index, ...)`` indexes its first argument by its second.
ATOMICS = frozenset({"add", "sub", "max", "min", "exch", "inc", "dec", "cas", "compare_and_swap"})


def _sources():
    """Every .py file of the package and the kernels, relative to the root (the
    ``gpufs/cuda_kernels`` link is not followed: ``cuda_kernels/`` is scanned once)."""
    out = []
    for top in ("gpufs", "cuda_kernels"):
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            out += [
                os.path.relpath(os.path.join(folder, f), ROOT)
                for f in sorted(files)
                if f.endswith(".py")
            ]
    return out


def _buffer_name(node):
    """The buffer a subscripted expression names: ``ctrl``, ``ws.out``, ``tab["bld"]``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.slice.value
    return None


def _int_literals(expr):
    """The integer literals of an index expression, not counting those inside a nested
    subscript (``out_i[base + spl[SPL_SLOT, s]]``: the inner one is checked on its own)."""
    found = []
    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Subscript):
            continue
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int)
            and not isinstance(node.value, bool)
        ):
            found.append(node.value)
        todo.extend(ast.iter_child_nodes(node))
    return found


def bare_indexes(source, buffers):
    """(line, buffer, literals) of each bare integer index into the layout axis of one of
    ``buffers`` in ``source``: the only axis of a vector, the first (row / field) axis of a
    table."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            name = _buffer_name(node.value)
            if name not in buffers:
                continue
            index = node.slice
            if isinstance(index, ast.Tuple) and index.elts:
                index = index.elts[0]
            lits = _int_literals(index)
            if lits:
                hits.append((node.lineno, name, lits))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ATOMICS
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "atomic"
            and len(node.args) >= 2
            and _buffer_name(node.args[0]) in buffers
        ):
            index = node.args[1]
            if isinstance(index, ast.Tuple) and index.elts:
                index = index.elts[0]
            lits = _int_literals(index)
            if lits:
                hits.append((node.lineno, _buffer_name(node.args[0]), lits))
    return hits


def test_no_bare_number_indexes_a_shared_layout():
    bad = []
    for rel in _sources():
        if rel == TYPES:
            continue
        gpu = any(rel.startswith(folder + os.sep) for folder in GPU_FOLDERS)
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            hits = bare_indexes(fh.read(), GPU_BUFFERS if gpu else GLOBAL_BUFFERS)
        bad += [f"{rel}:{line}: {name}[...{lits}...]" for line, name, lits in hits]
    assert not bad, "index these with gpufs._types' names:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "source, n_hits",
    [
        ("ctrl[0] = n", 1),
        ("x = scal[11]", 1),
        ("bld[5, n_split]", 1),
        ("tab['ctrl'][[0, 2, 4]] = a, b, c", 1),
        ("spl[8 : 8 + CAT_WORDS, :m] = bits", 1),
        ("out_i[base + 4 * n_active + k] = 0", 1),
        ("cuda.atomic.add(ctrl, 7, 1)", 1),
        ("ws.out[: ws.field_base + N_OUT * k]", 0),
        ("bld[BLD_FIRST_TASK, : m + 1] = t", 0),
        ("nodes[NODE_COUNT, 2 * spl[SPL_NODE, s] + 1]", 0),
        ("out_i[lc_base + spl[1, s]] = lc", 1),  # the inner spl, once
        ("ctrl[CTRL_N_FEATS + fcur]", 0),
        ("hist[k, 0, 1]", 0),
        ("cuda.atomic.add(out, (slot, t0 + sl, k & 1), v)", 0),
    ],
)
def test_the_scan_finds_bare_indexes(source, n_hits):
    """The scanner itself: it must see each form the layouts were once indexed by."""
    assert len(bare_indexes(source, GPU_BUFFERS)) == n_hits


def _layout(prefix, exclude=()):
    return {
        name: getattr(T, name)
        for name in dir(T)
        if name.startswith(prefix) and name not in exclude and isinstance(getattr(T, name), int)
    }


@pytest.mark.parametrize(
    "prefix, size, exclude",
    [
        ("SCAL_", T.N_SCAL, ()),
        ("BLD_", T.N_BLD_ROWS, ()),
        ("NODE_", T.N_NODE_ROWS, ()),
        ("PF_", None, ()),  # two tables, checked below
        ("OUT_", None, ("OUT_HEADER",)),  # header words and field rows, checked below
        ("SPL_", T.SPL_ROWS, ("SPL_ROWS", "SPL_CAT_BITS")),
    ],
)
def test_layout_names_are_distinct_and_cover_the_buffer(prefix, size, exclude):
    names = _layout(prefix, exclude)
    assert names, prefix
    if size is None:
        return
    rows = sorted(names.values())
    if prefix == "SPL_":  # the CAT_WORDS bitset rows lie between the last field and the flag
        rows += range(T.SPL_CAT_BITS, T.SPL_CAT_BITS + T.CAT_WORDS)
        rows.sort()
    assert rows == list(range(size)), names


def test_search_scalars():
    assert len(set(T.SEARCH_SCALARS)) == T.N_SCAL
    names = _layout("SCAL_")
    assert {T.SEARCH_SCALARS[i] for i in names.values()} == set(T.SEARCH_SCALARS)
    for name, i in names.items():
        assert T.SEARCH_SCALARS[i] == name[len("SCAL_") :].lower()
    # every scalar but the level's budget is read from the split parameters by name
    from gpufs.backends.base import SplitParams

    fields = {f.name for f in dataclasses.fields(SplitParams)}
    assert set(T.SEARCH_SCALARS) - fields == {"budget"}


def test_output_buffer():
    fields = {n: i for n, i in _layout("OUT_").items() if i < T.OUT_CAT_BITS}
    header = {T.OUT_N_ADMITTED, T.OUT_N_SPLITS, T.OUT_N_NEXT}
    assert sorted(header) == list(range(T.OUT_HEADER)) and T.OUT_ADMITTED == T.OUT_HEADER
    per_slot = {
        "OUT_FEATURE",
        "OUT_BIN",
        "OUT_MISSING_LEFT",
        "OUT_GAIN",
        "OUT_LEFT_COUNT",
        "OUT_G_LEFT",
        "OUT_H_LEFT",
    }
    for name in per_slot:
        assert T.OUT_FIELDS[fields[name]] == name[len("OUT_") :].lower()
    assert sorted(fields[n] for n in per_slot) == list(range(len(T.OUT_FIELDS)))
    assert T.OUT_CAT_BITS == len(T.OUT_FIELDS) and T.N_OUT == T.OUT_CAT_BITS + T.CAT_WORDS


def test_per_feature_results_and_control_words():
    assert sorted([T.PF_SCORE, T.PF_GAIN]) == list(range(T.N_PF_F))
    assert sorted([T.PF_BIN, T.PF_MISSING_LEFT, T.PF_G_LEFT, T.PF_H_LEFT]) == list(range(T.N_PF_I))
    # CTRL_N_FEATS names two words, one per feature list of feats2
    words = [T.CTRL_N_SEGMENTS, T.CTRL_SPLIT_TASKS, T.CTRL_BUILD_TASKS, T.CTRL_NEW_LIST]
    words += [T.CTRL_TICKET, T.CTRL_N_FEATS, T.CTRL_N_FEATS + 1]
    assert len(set(words)) == len(words) and all(0 <= w < T.N_CTRL for w in words)
    assert set(_layout("CTRL_")) == {
        "CTRL_N_SEGMENTS",
        "CTRL_SPLIT_TASKS",
        "CTRL_BUILD_TASKS",
        "CTRL_N_FEATS",
        "CTRL_NEW_LIST",
        "CTRL_TICKET",
    }
    # ``gpu.level.decide_level`` uploads the node table's two sums in one copy
    assert list(range(T.N_NODE_ROWS))[T.NODE_SUMS] == [T.NODE_G, T.NODE_H]


def test_the_workspace_allocates_the_named_sizes():
    from gpufs.backends.gpu import workspace as W

    S, N = 5, 11
    shapes = {name: shape(S, N) for name, shape in W._ITAB}
    assert shapes["ctrl"] == (T.N_CTRL,)
    assert shapes["spl"] == (T.SPL_ROWS, S)
    assert shapes["bld"] == (T.N_BLD_ROWS, S + 1)  # a column past the last: its last task
    assert shapes["nodes"] == (T.N_NODE_ROWS, N)
    assert W._P0 == 8 * T.N_SCAL


def test_chunk_sizes_are_defined_once():
    """The row-chunk sizes of the chunked array passes live in ``gpufs._types`` only
    (``CHUNK_ELEMENTS_*``, each with why it is what it is)."""
    defined = []
    for rel in _sources():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for t in targets:
                if isinstance(t, ast.Name) and "CHUNK_ELEMENTS" in t.id:
                    defined.append((rel, t.id))
    assert defined and all(rel == TYPES for rel, _ in defined), defined
    assert {name for _, name in defined} == {
        "CHUNK_ELEMENTS_WARM_KEY",
        "CHUNK_ELEMENTS_COLUMN_SCALE",
        "CHUNK_ELEMENTS_STAGEWISE",
        "CHUNK_ELEMENTS_NONFINITE",
    }


def test_cpu_kernels_read_named_tuples_by_field():
    """The CPU kernels read the named tuples of ``backends/cpu/_args`` by field
    (``level.hist``), not unpacked by position (``active, hist, ... = level``), where a field
    added or reordered in ``_args`` would silently shift every name after it. Short
    unpackings of plain tuples (three names or fewer) stay allowed."""
    found = []
    for rel in _sources():
        if not rel.startswith(os.path.join("gpufs", "backends", "cpu")):
            continue
        with open(os.path.join(ROOT, rel)) as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Tuple)
                and len(node.targets[0].elts) > 3
                and isinstance(node.value, ast.Name)
            ):
                found.append(f"{rel}:{node.lineno}: ... = {node.value.id}")
    assert not found, "\n".join(found)
