"""The GPU's rows' half of a level (``GPUBackend.advance_level``), for a Dask shard.

Owns the step a GPU shard runs per level when the driver decides (``gpufs.dask``): upload
the driver's ``SplitPlan`` as the split table the search kernel would have written, then the
existing partition (count + plan, scatter) and histogram launches, then the built children's
siblings by exact int64 subtraction (array ops, no kernel of ours), so the level's
histograms are complete on the device, as ``CPUBackend.advance_level`` leaves them on the host.
Two device -> host copies per level: the left counts here, and the caller's payload of the
histograms (``level_histograms``).
"""
from __future__ import annotations

import numpy as np

from .._categorical import CAT_WORDS
from .._types import SPL_ROWS

__all__ = ["advance_level"]


def _split_table(st, plan, S):
    """The level's split table (``cuda_kernels.split``'s ``spl`` layout) from ``plan``, as a
    host (SPL_ROWS, S) int64 array, and the partition's task count."""
    ws = st.ws
    slot = np.asarray(plan.split_slot, np.int64)
    m = slot.shape[0]
    nodes = st.active[slot]
    starts, counts = st.node_start[nodes], st.node_count[nodes]
    tasks = ws.tasks_for(counts)
    spl = np.zeros((SPL_ROWS, S), np.int64)
    spl[0, :m], spl[1, :m] = nodes, slot
    spl[2, :m] = np.asarray(plan.feature, np.int64)
    spl[3, :m] = np.asarray(plan.bin, np.int64)
    spl[4, :m] = np.asarray(plan.missing_left, np.int64)
    spl[5, :m], spl[6, :m] = starts, counts
    spl[7, :m] = np.concatenate([[0], np.cumsum(tasks)[:-1]]) if m else 0
    bits = np.asarray(plan.cat_bits)
    if bits.shape[-1]:  # without categorical features the plan has no bitset words
        spl[8:8 + CAT_WORDS, :m] = bits.astype(np.int64).T
        spl[8 + CAT_WORDS, :m] = np.asarray(plan.is_cat, np.int64)
    return spl, int(tasks.sum())


def advance_level(be, st, plan, build_next):
    """``CPUBackend.advance_level`` on the device: partition ``st``'s rows by ``plan``, set
    the children's segments and sums, and (``build_next``) the next level's histograms over
    ``plan.next_feats[:plan.next_n_feats]`` (the smaller child of each split by this
    process's row counts, ties left, its sibling by exact subtraction). Advances ``st``;
    returns the rows each split sent left, (n_split,) int64 on the host."""
    ws = st.ws
    k = st.n_active
    slot = np.asarray(plan.split_slot, np.int64)
    m = slot.shape[0]
    nodes = st.active[slot]
    cur = st.level & 1
    hist = ws.hist_index ^ cur
    left = np.zeros(0, np.int64)
    n_feats = int(plan.next_n_feats)
    if m:
        spl, n_tasks = _split_table(st, plan, ws.S)
        tab = ws.itab_host()
        tab["ctrl"][[0, 1]] = m, n_tasks  # ctrl[7], the kernels' ticket, stays 0
        tab["spl"][...] = spl
        head = tab["ctrl"].shape[0] + spl.size  # ctrl then spl, the first two sections
        ws._set(ws.itab[:head], tab["_buf"][:head])
        with be._phase("level"):
            be._partition(ws, cur, n_tasks, lc_base=0, ident=st.level == 0)
            if build_next and n_feats:
                ws.set_feats(st.fcur ^ 1, plan.next_feats[:n_feats])
                counts = st.node_count[nodes]
                ws.zero_hist(hist ^ 1, 2 * m)
                be._histogram(ws, st, cur=cur ^ 1, fcur=st.fcur ^ 1,
                              n_build_tasks=int(ws.tasks_for(counts // 2).sum()),
                              n_feats=n_feats, out=hist ^ 1)
        left = np.asarray(be._to_host(ws.out[:k]), np.int64)[slot]
    # the host's node table, as ``_GPUTree.apply_level`` keeps it
    L, R = 2 * nodes + 1, 2 * nodes + 2
    st.node_start[L] = st.node_start[nodes]
    st.node_count[L] = left
    st.node_start[R] = st.node_start[nodes] + left
    st.node_count[R] = st.node_count[nodes] - left
    st.node_g[L], st.node_h[L] = plan.left_g, plan.left_h
    st.node_g[R] = st.node_g[nodes] - plan.left_g
    st.node_h[R] = st.node_h[nodes] - plan.left_h
    is_split = np.zeros(k, np.bool_)
    is_split[slot] = True
    st.leaves.append(st.active[~is_split])
    nxt = np.empty(2 * m, np.int64)
    nxt[0::2], nxt[1::2] = L, R
    if m and build_next and n_feats:
        # the smaller child was built (``partition._plan``: ties left); its sibling = parent
        # - built, exact in int64, over every slot (the unlisted ones are never read)
        small_left = left <= st.node_count[nodes] - left
        b = 2 * np.arange(m, dtype=np.int64) + np.where(small_left, 0, 1)
        s = b ^ 1
        xp = be.xp
        h, parent = ws.hist[hist ^ 1], ws.hist[hist]
        h[xp.asarray(s)] = parent[xp.asarray(slot)] - h[xp.asarray(b)]
    st.active = nxt
    st.level += 1
    st.fcur ^= 1
    st.feats = np.ascontiguousarray(plan.next_feats, np.int32)
    st.n_feats = n_feats
    return left


def level_histograms(st):
    """The current level's histograms of ``st`` on the device, (n_active, n_slots, 2) int64,
    complete after ``start_tree`` and ``advance_level`` (after ``level_step`` only the built
    children are there: their siblings are derived by the next search)."""
    ws = st.ws
    return ws.hist[ws.hist_index ^ (st.level & 1)][:st.n_active]

