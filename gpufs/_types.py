"""Every dtype gpufs uses, the GPU's host-kernel buffer layouts, the row-chunk sizes of
the chunked array passes and the one array type the CPU kernels read user input as, each in
one place.

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

# ---------------------------------------------------------------------------------------------
# Elements (rows x columns) per row chunk of the passes that sweep a data matrix in row chunks
# (``gpufs.data._colstats.row_slices``), so that no temporary of the matrix's full size is
# made. One per user, because each user's temporaries and what its size was chosen for differ:
#: ``warm_start``'s column checksums (``gpufs.data._warm_key``): a few uint64 temporaries of
#: 2M elements (16 MB each) stay at a few tens of MB. The checksum is a wrapping integer sum,
#: so its value does not depend on the chunk size.
CHUNK_ELEMENTS_WARM_KEY = 1 << 21
#: ControlBurn's importance scale, the weighted variance of each tree's column
#: (``gpufs.selectors.controlburn``): one float64 temporary of 32 MB; bounded memory, not
#: tuned. The chunks fix the float64 summation order, so a change may change the last bits of
#: the importances.
CHUNK_ELEMENTS_COLUMN_SCALE = 1 << 22
#: Forward stagewise's sweeps (``gpufs.selectors._stagewise_stages``), per device, a handful
#: of float64 temporaries of this size alive at once. CPU: 1 MB each, so the dozen elementwise
#: passes of a Newton sweep run in cache (measured 3x faster than 32 MB chunks,
#: ``bench/bench_stagewise.py``). GPU: 256 MB each, so kernel-launch overhead stays small next
#: to the work. Like the scale's, these fix the summation order of the sweeps' sums.
CHUNK_ELEMENTS_STAGEWISE = {"cpu": 1 << 17, "gpu": 1 << 25}
#: The NaN/inf scan of a strided X (neither C nor F order; ``gpufs.data._input``): each chunk
#: is copied to C order (8 MB of float64), so the scan compiles for C order only and never
#: copies the whole matrix.
CHUNK_ELEMENTS_NONFINITE = 1 << 20

#: uint32 words of one category bitset (256 bins; ``gpufs.rules._categorical``'s bitsets).
CAT_WORDS = 8
# ---------------------------------------------------------------------------------------------
# The GPU level's buffer layouts, shared by the host code (``gpufs.backends.gpu``) and its
# kernels (``cuda_kernels``), each named once here. Plain module-level integers: numba and
# numba-cuda fold a global int into a kernel as a compile-time constant (a class namespace or
# an IntEnum is not folded), and this file is hashed into numba's cache key
# (``gpufs._numba_setup._INLINED_SOURCES``), so editing a layout recompiles the kernels.
# ``tests/test_named_layouts.py`` checks that no bare number indexes these buffers elsewhere.

#: The split search's scalars, float64 in device memory (``split.search_kernel``'s ``scal``),
#: in this order; every name but "budget" is a ``SplitParams`` attribute. max_cat_to_onehot,
#: max_cat_threshold and the level's feature budget (-1: none) are small integers, exact as
#: floats.
SEARCH_SCALARS = (
    "g_scale",
    "h_scale",
    "reg_lambda",
    "gain_divisor",
    "min_child_weight",
    "min_split_gain",
    "max_cat_to_onehot",
    "cat_smooth",
    "cat_l2",
    "min_data_per_group",
    "max_cat_threshold",
    "budget",
)
(
    SCAL_G_SCALE,
    SCAL_H_SCALE,
    SCAL_REG_LAMBDA,
    SCAL_GAIN_DIVISOR,
    SCAL_MIN_CHILD_WEIGHT,
    SCAL_MIN_SPLIT_GAIN,
    SCAL_MAX_CAT_TO_ONEHOT,
    SCAL_CAT_SMOOTH,
    SCAL_CAT_L2,
    SCAL_MIN_DATA_PER_GROUP,
    SCAL_MAX_CAT_THRESHOLD,
    SCAL_BUDGET,
) = range(len(SEARCH_SCALARS))
N_SCAL = len(SEARCH_SCALARS)

#: The control words ``ctrl`` (int64, on the device; zero at a tree's start but where set):
#: CTRL_N_SEGMENTS the segments of the split table, which are also those of the next build
#: table (one per split; the root's build table has one); CTRL_SPLIT_TASKS the partition's
#: tasks; CTRL_BUILD_TASKS the histogram's tasks; word 3 unused; CTRL_N_FEATS + fcur the
#: length of feature list fcur (two words, one per list of ``feats2``); CTRL_NEW_LIST 1 when
#: the decision rebuilt the next list (Omega's only), 0 when it copies this one;
#: CTRL_TICKET the blocks of a fused launch that are done (zero between launches,
#: ``_device_fns.last_block_done``).
CTRL_N_SEGMENTS = 0
CTRL_SPLIT_TASKS = 1
CTRL_BUILD_TASKS = 2
CTRL_N_FEATS = 4
CTRL_NEW_LIST = 6
CTRL_TICKET = 7
N_CTRL = 8

#: The rows of the build table ``bld`` (int64, one column per node to build, plus one for the
#: last task offset): segment start, row count, the slot its histogram is built in, the
#: sibling slot (derived as parent - built by the next search), the parent's slot, first task
#: (tasks of all nodes numbered consecutively).
BLD_START, BLD_COUNT, BLD_SLOT, BLD_SIBLING, BLD_PARENT, BLD_FIRST_TASK = range(6)
N_BLD_ROWS = 6

#: The rows of the node table ``nodes`` (int64, one column per node of the tree): segment
#: start, row count, and the fixed-point sums G_q, H_q.
NODE_START, NODE_COUNT, NODE_G, NODE_H = range(4)
N_NODE_ROWS = 4
#: The rows of the two sums, adjacent, so the host uploads them in one copy.
NODE_SUMS = slice(NODE_G, NODE_H + 1)

#: The search's per-feature results: ``pf_f`` (2, S, d) float64 rows score, gain, and
#: ``pf_i`` (4, S, d) int64 rows bin, missing_left, G_L, H_L.
PF_SCORE, PF_GAIN = range(2)
N_PF_F = 2
PF_BIN, PF_MISSING_LEFT, PF_G_LEFT, PF_H_LEFT = range(4)
N_PF_I = 4

#: The level's output buffer (``split._decide``; its one device -> host copy), int64: a
#: header of OUT_HEADER words (admitted count, splits, features of the next list), then the
#: admitted features in order from OUT_ADMITTED (d words), then the fields of each slot ...
OUT_N_ADMITTED, OUT_N_SPLITS, OUT_N_NEXT = range(3)
OUT_HEADER = 3
OUT_ADMITTED = OUT_HEADER
#: ... the fields of one slot in the level's output buffer (then the CAT_WORDS bitset words),
#: each field a run of n_active entries ("gain" is float64 in the buffer's float64 view;
#: "left_count" is written by ``partition_plan_kernel``) ...
OUT_FIELDS = ("feature", "bin", "missing_left", "gain", "left_count", "g_left", "h_left")
(
    OUT_FEATURE,
    OUT_BIN,
    OUT_MISSING_LEFT,
    OUT_GAIN,
    OUT_LEFT_COUNT,
    OUT_G_LEFT,
    OUT_H_LEFT,
) = range(len(OUT_FIELDS))
#: ... the first of the CAT_WORDS bitset fields of a categorical split (zeros otherwise) ...
OUT_CAT_BITS = len(OUT_FIELDS)
#: ... int64 entries per slot of that buffer ...
N_OUT = OUT_CAT_BITS + CAT_WORDS

#: ... and the rows of the split table ``spl`` (int64, one column per split): node, slot,
#: feature, bin, missing_left, segment start, segment count, first task, the CAT_WORDS bitset
#: words of a categorical split (from SPL_CAT_BITS), 1 for a categorical split (else 0).
(
    SPL_NODE,
    SPL_SLOT,
    SPL_FEATURE,
    SPL_BIN,
    SPL_MISSING_LEFT,
    SPL_START,
    SPL_COUNT,
    SPL_FIRST_TASK,
    SPL_CAT_BITS,
) = range(9)
SPL_IS_CAT = SPL_CAT_BITS + CAT_WORDS
SPL_ROWS = SPL_IS_CAT + 1


def read_only(a):
    """The host array ``a`` as a read-only view (no copy), the one way the CPU kernels that
    read user input (X, y) receive it.

    numba compiles a kernel once per argument type, and a read-only array is a type of its own.
    User arrays come both ways (a memmap, a frozen array, pandas' copy-on-write arrays,
    scikit-learn's ``readonly_memmap`` checks), so without this a read-only X compiled the
    binning, the NaN scan, the objective and the prediction kernels a second time.

    Parameters
    ----------
    a : numpy.ndarray
        Any shape and dtype.

    Returns
    -------
    numpy.ndarray
        ``a`` itself if it is read-only already, else a view of it with ``flags.writeable``
        False.
    """
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view
