"""The scalar rules compiled for both devices: numba inlines them into the CPU
kernels (backends/cpu/) and the CUDA kernels (cuda_kernels/) alike.

``_gain`` (the split-gain formula and split rule), ``_level`` (one level's
decisions), ``_tasks`` (how a node's rows are cut into tasks), ``_categorical``
(the categorical scan, bitsets, go-left rule), ``_exactmath`` (exp / log /
sigmoid from + - * / only), ``_hist_layout`` (the histogram layout),
``_group_scan`` (GT-GBM's score of a pseudo-feature histogram). Every file here
is hashed into numba's cache folder name (``gpufs._numba_setup``): an edit
never loads stale kernels.
"""
