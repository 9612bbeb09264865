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
