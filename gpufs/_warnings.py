"""gpufs's own warning classes, so that users can filter them by class.

``SelectionWarning`` marks a selection that is not exactly what was asked for: fewer features
than ``n_features_to_select`` (too few have any gain, or the forest covers too few), a k that
no lambda of the lasso gives and that was completed, or no feature at all. It subclasses
``UserWarning``, so existing filters keep working; in a cross-validation that repeats the
warning in every fold, ``warnings.filterwarnings("ignore", category=gpufs.SelectionWarning)``
silences only these.

``warn_from_caller`` issues a warning at the user's line: the first frame outside gpufs (and
outside scikit-learn's wrappers of fit and transform), whatever the depth of the call.
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["SelectionWarning", "warn_from_caller"]

#: modules whose frames are never the caller a warning names (gpufs's own, and the wrappers
#: scikit-learn puts around fit / transform)
_SKIPPED = ("gpufs", "sklearn")


def _skipped(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return any(name == m or name.startswith(m + ".") for m in _SKIPPED)


def warn_from_caller(message, category=UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first frame outside gpufs and
    scikit-learn (the user's line), instead of a hard-coded ``stacklevel`` that depends on
    the decorators and helpers between the user and the warning."""
    frame = sys._getframe(1)
    level = 2  # stacklevel 2: the caller of this function
    while frame.f_back is not None and _skipped(frame):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


class SelectionWarning(UserWarning):
    """The selection differs from what was asked for (see the module docstring).

    Examples
    --------
    >>> import warnings
    >>> import gpufs
    >>> warnings.filterwarnings("ignore", category=gpufs.SelectionWarning)
    """
