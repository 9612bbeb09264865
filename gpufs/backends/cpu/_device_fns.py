"""The shared rules compiled once for the CPU kernels: the functions every module inlines.

Owns the ``njit(inline="always")`` versions of the one-source rules (``gpufs.rules._gain``'s
split candidate, bin scan (the scalar one and the blocked form the split search runs), leaf
rule; ``gpufs.rules._categorical``'s scans and left-set tests; ``gpufs.rules._level``'s per-node
choice) and ``ROW_BLOCK``, the rows per task of the per-row kernels. The GPU's counterpart is
``cuda_kernels/_device_fns.py``.
"""

from numba import njit

from ...rules import _categorical, _gain, _level

_candidate = njit(inline="always")(_gain.candidate)
_scan_feature = njit(inline="always")(_gain.make_scan_feature(_candidate))
_scan_feature_blocked = njit(inline="always")(_gain.make_scan_feature_blocked(_candidate))
_scan_categorical = njit(inline="always")(_categorical.make_scan_categorical(_candidate))
_left_word = njit(inline="always")(_categorical.left_word)
_split_goes_left = njit(inline="always")(_categorical.split_goes_left)
_split_goes_left_raw = njit(inline="always")(_categorical.split_goes_left_raw)
_bin_of = njit(inline="always")(_gain.bin_of)
_bin_of_few = njit(inline="always")(_gain.bin_of_few)
_bin_of_one = njit(inline="always")(_gain.bin_of_one)
_leaf_binned = njit(inline="always")(_gain.make_leaf_of(_split_goes_left))
_leaf_raw = njit(inline="always")(_gain.make_leaf_of(_split_goes_left_raw))
_best_over_features = njit(inline="always")(_level.best_over_features)
_decide_level = njit(cache=True)(_level.decide_level)

#: Rows per task of the per-row kernels (gradients, losses, binning, prediction). The fit runs
#: with numba's chunk size at one task (``gpufs._threading``), so a loop over single rows
#: would make every row a task: a million scheduler round trips per pass.
ROW_BLOCK = 4096
