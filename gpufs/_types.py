"""Every dtype gpufs uses, in one place.

Both backends import their dtypes from here, so a binned matrix, a histogram or a tree array
has the same dtype on the CPU and on the GPU.
"""

import numpy as np

#: Binned feature matrix, shape (n_samples, n_features), C order.
X_BINNED_DTYPE = np.uint8
#: Value bins are 0 .. MAX_VALUE_BINS - 1; MISSING_BIN holds NaN.
MAX_VALUE_BINS = 255
MISSING_BIN = 255
#: Histogram slots of a feature at most (255 value bins + the missing bin); the full
#: (dense) layout gives every feature this many (``gpufs.rules._hist_layout``).
N_HIST_BINS = 256
#: GT-GBM's standardized columns are integers in [0, STANDARDIZED_MAX] (8 fractional bits;
#: ``gpufs.engine.group_testing``).
STANDARDIZED_MAX = 255
#: A feature whose most frequent bin holds at least this fraction of the binning sample is
#: sparse: that bin is derived from the node's totals instead of accumulated, and the CPU
#: reads the feature's other bins from a row-wise list of them (``gpufs.rules._hist_layout``).
#: LightGBM's ``sparse_threshold`` has the same default.
MOST_FREQ_MIN_FRACTION = 0.8

#: Cut points per feature (float64, upper edges of the value bins).
CUT_DTYPE = np.float64

#: Gradients / hessians as the objective computes them.
GRAD_DTYPE = np.float64
#: Fixed-point gradients / hessians (exact, order-independent sums on every device).
QGRAD_DTYPE = np.int64
#: Histogram entries: int64 sums of fixed-point (g, h), shape (n_nodes, n_slots, 2), feature
#: f's bins at the slots ``offset[f] .. offset[f + 1] - 1`` of its ``HistLayout``.
HIST_DTYPE = np.int64

#: Row indices kept partitioned by node.
ROW_INDEX_DTYPE = np.int32

#: Tree arrays (struct of arrays over a complete binary tree).
FEATURE_DTYPE = np.int32  # -1 = leaf or unused node
BIN_THRESHOLD_DTYPE = np.uint8  # go left if bin <= bin_threshold
THRESHOLD_DTYPE = np.float64  # go left if x <= threshold (raw-data prediction)
VALUE_DTYPE = np.float64  # leaf value (already multiplied by the learning rate)
GAIN_DTYPE = np.float64
COVER_DTYPE = np.float64  # sum of hessians in the node
COUNT_DTYPE = np.int64  # rows in the node

#: Raw (margin) predictions.
RAW_DTYPE = np.float64

#: uint32 words of one category bitset (256 bins; ``gpufs.rules._categorical``'s bitsets).
CAT_WORDS = 8
#: The GPU level's buffer layouts, shared by ``gpufs.backends`` and ``cuda_kernels.split``:
#: the fields of one slot in the level's output buffer (then the CAT_WORDS bitset words) ...
OUT_FIELDS = ("feature", "bin", "missing_left", "gain", "left_count", "g_left", "h_left")
#: ... int64 entries per slot of that buffer ...
N_OUT = len(OUT_FIELDS) + CAT_WORDS
#: ... and the rows of the split table: node, slot, feature, bin, missing_left, segment start,
#: segment count, first task, the CAT_WORDS bitset words, 1 for a categorical split.
SPL_ROWS = 8 + CAT_WORDS + 1
