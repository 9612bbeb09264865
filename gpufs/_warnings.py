"""gpufs's own warning classes, so that users can filter them by class.

``SelectionWarning`` marks a selection that is not exactly what was asked for: fewer features
than ``n_features_to_select`` (too few have any gain, or the forest covers too few), a k that
no lambda of the lasso gives and that was completed, or no feature at all. It subclasses
``UserWarning``, so existing filters keep working; in a cross-validation that repeats the
warning in every fold, ``warnings.filterwarnings("ignore", category=gpufs.SelectionWarning)``
silences only these.
"""
from __future__ import annotations

__all__ = ["SelectionWarning"]


class SelectionWarning(UserWarning):
    """The selection differs from what was asked for (see the module docstring).

    Examples
    --------
    >>> import warnings
    >>> import gpufs
    >>> warnings.filterwarnings("ignore", category=gpufs.SelectionWarning)
    """
