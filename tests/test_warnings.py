"""``gpufs._warnings.warn_from_caller``: a warning names the user's line, at any depth of
gpufs calls and scikit-learn wrappers (no hard-coded stacklevel)."""

import inspect
import warnings

import pytest

from gpufs._warnings import warn_from_caller


def _chain(modules):
    """A call chain, one function per module name (the last one calls warn_from_caller),
    returning the outermost function."""
    inner = None
    for i, name in enumerate(reversed(modules)):
        ns = {"__name__": name, "warn_from_caller": warn_from_caller, "inner": inner}
        body = "warn_from_caller('deep', UserWarning)" if inner is None else "inner()"
        exec(compile(f"def f{i}():\n    {body}\n", f"<{name}>", "exec"), ns)
        inner = ns[f"f{i}"]
    return inner


@pytest.mark.parametrize(
    "modules",
    [
        ["gpufs._fake"],
        ["gpufs.selectors._fake", "gpufs._fake"],
        ["gpufs.selectors.fake", "sklearn.utils._fake_wrapper", "gpufs._a", "gpufs._b", "gpufs._c"],
    ],
)
def test_the_warning_names_the_first_line_outside_gpufs(modules):
    fn = _chain(modules)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        fn()
    assert len(got) == 1 and str(got[0].message) == "deep"
    assert (got[0].filename, got[0].lineno) == (__file__, line)


def test_a_caller_outside_gpufs_is_named_at_once():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        warn_from_caller("here", RuntimeWarning)
    assert got[0].category is RuntimeWarning
    assert (got[0].filename, got[0].lineno) == (__file__, line)


def test_no_hard_coded_stacklevel_in_gpufs():
    """Every warning of gpufs names the user's line through ``warn_from_caller``: a
    ``stacklevel=`` anywhere else depends on the decorators and helpers in between."""
    import ast
    import os

    import gpufs

    root = os.path.dirname(gpufs.__file__)
    found = []
    for folder, _, files in os.walk(root):
        for f in files:
            path = os.path.join(folder, f)
            if not f.endswith(".py") or path == os.path.join(root, "_warnings.py"):
                continue
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            found += [
                f"{os.path.relpath(path, root)}:{node.lineno}"
                for node in ast.walk(tree)
                if isinstance(node, ast.keyword) and node.arg == "stacklevel"
            ]
    assert not found, found


def test_controlburn_warns_at_the_line_that_fits_a_pipeline():
    """ControlBurn's SelectionWarning names the user's line also when scikit-learn's Pipeline
    calls fit (a hard-coded stacklevel named a line of sklearn/pipeline.py)."""
    import numpy as np
    from sklearn.pipeline import make_pipeline

    from gpufs import ControlBurnClassifier, SelectionWarning

    rng = np.random.default_rng(1)
    X = np.zeros((40, 10))
    X[:, :6] = rng.random((40, 6))
    y = ((X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=40)) > 0.9).astype(int)
    pipe = make_pipeline(
        ControlBurnClassifier(n_features_to_select=8, max_depth=4, random_state=0, device="cpu")
    )
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        pipe.fit(X, y)
    (w,) = [w for w in got if w.category is SelectionWarning]
    assert (w.filename, w.lineno) == (__file__, line)
