"""The GPU's two halves of a level (``GPUBackend.advance_level``, ``decide_level``), for Dask.

Owns the step a GPU shard runs per level when the driver decides (``gpufs.dask``): upload
the driver's ``SplitPlan`` as the split table the search kernel would have written, then the
existing partition (count + plan, scatter) and histogram launches, then the built children's
siblings by exact int64 subtraction (array ops, no kernel of ours), so the level's
histograms are complete on the device, as ``CPUBackend.advance_level`` leaves them on the host.
Two device -> host copies per level: the left counts here, and the caller's payload of the
histograms (``level_histograms``). And ``decide_level``: the search kernel's decisions on
those histograms, read back as the CPU's ``SplitPlan`` (a Dask driver decides on the host).
"""

from __future__ import annotations

import numpy as np

from ..._types import (
    CTRL_N_FEATS,
    CTRL_N_SEGMENTS,
    CTRL_SPLIT_TASKS,
    N_OUT,
    NODE_SUMS,
    OUT_BIN,
    OUT_FEATURE,
    OUT_G_LEFT,
    OUT_H_LEFT,
    OUT_MISSING_LEFT,
    OUT_N_NEXT,
    SPL_BIN,
    SPL_CAT_BITS,
    SPL_COUNT,
    SPL_FEATURE,
    SPL_FIRST_TASK,
    SPL_IS_CAT,
    SPL_MISSING_LEFT,
    SPL_NODE,
    SPL_ROWS,
    SPL_SLOT,
    SPL_START,
)
from ..base import SplitPlan

__all__ = ["advance_level", "decide_level"]


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
    spl[SPL_NODE, :m], spl[SPL_SLOT, :m] = nodes, slot
    spl[SPL_FEATURE, :m] = np.asarray(plan.feature, np.int64)
    spl[SPL_BIN, :m] = np.asarray(plan.bin, np.int64)
    spl[SPL_MISSING_LEFT, :m] = np.asarray(plan.missing_left, np.int64)
    spl[SPL_START, :m], spl[SPL_COUNT, :m] = starts, counts
    spl[SPL_FIRST_TASK, :m] = np.concatenate([[0], np.cumsum(tasks)[:-1]]) if m else 0
    bits = np.asarray(plan.cat_bits)
    if bits.shape[-1]:  # without categorical features the plan has no bitset words
        spl[SPL_CAT_BITS:SPL_IS_CAT, :m] = bits.astype(np.int64).T
        spl[SPL_IS_CAT, :m] = np.asarray(plan.is_cat, np.int64)
    return spl, int(tasks.sum())


def advance_level(be, st, plan, build_next):
    """``CPUBackend.advance_level`` on the device (``GPUBackend.advance_level``).

    Partition ``st``'s rows by ``plan``, set the children's segments and sums, and
    (``build_next``) the next level's histograms over ``plan.next_feats[:plan.next_n_feats]``
    (the smaller child of each split by this process's row counts, ties left, its sibling by
    exact subtraction).

    Parameters
    ----------
    be : GPUBackend
        Launches the partition and histogram kernels.
    st : _GPUTree
        The tree state of ``be.start_tree``, advanced in place to the next level.
    plan : SplitPlan
        The level's decisions (``decide_level``'s, of this process or of a cluster's driver).
    build_next : bool
        Build the histograms of the next level (False on the last level).

    Returns
    -------
    ndarray of shape (n_split,), int64
        Host: the rows each split sent left, in ``plan.split_slot`` order.
    """
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
        ctrl = tab["ctrl"]  # CTRL_TICKET, the kernels' ticket, stays 0
        ctrl[CTRL_N_SEGMENTS], ctrl[CTRL_SPLIT_TASKS] = m, n_tasks
        tab["spl"][...] = spl
        head = tab["ctrl"].shape[0] + spl.size  # ctrl then spl, the first two sections
        ws._set(ws.itab[:head], tab["_buf"][:head])
        with be._phase("level"):
            be._partition(ws, cur, n_tasks, lc_base=0, ident=st.level == 0)
            if build_next and n_feats:
                ws.set_feats(st.fcur ^ 1, plan.next_feats[:n_feats])
                counts = st.node_count[nodes]
                ws.zero_hist(hist ^ 1, 2 * m)
                be._histogram(
                    ws,
                    st,
                    cur=cur ^ 1,
                    fcur=st.fcur ^ 1,
                    n_build_tasks=int(ws.tasks_for(counts // 2).sum()),
                    n_feats=n_feats,
                    out=hist ^ 1,
                )
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
    """The current level's histograms of ``st`` on the device.

    Complete after ``start_tree`` and ``advance_level`` (after ``level_step`` only the built
    children are there: their siblings are derived by the next search).

    Parameters
    ----------
    st : _GPUTree
        The tree state.

    Returns
    -------
    ndarray of shape (n_active, n_slots, 2), int64
        A view of the level's histogram buffer, in the tree's ``HistLayout``.
    """
    ws = st.ws
    return ws.hist[ws.hist_index ^ (st.level & 1)][: st.n_active]


def decide_level(be, st, penalty, allowed, used, budget, split):
    """``CPUBackend.decide_level`` on the device (``GPUBackend.decide_level``).

    For a tree advanced by ``advance_level`` (its level's histograms complete): the search
    kernel's decisions (no subtraction), read back as the CPU's; changes no state of ``st``.

    Parameters
    ----------
    be : GPUBackend
        Launches the search kernel.
    st : _GPUTree
        The tree state; not advanced.
    penalty : ndarray of shape (n_features,), float64
        Subtracted from a split's score on each feature.
    allowed : ndarray of shape (n_features,), bool
        Features a split may use.
    used : ndarray of shape (n_features,), bool
        Omega at the level's start.
    budget : int
        New features the level may still admit (< 0: no budget).
    split : SplitParams
        The split search's parameters.

    Returns
    -------
    result : LevelResult
        The level's decisions, one entry per active node.
    plan : SplitPlan
        What ``advance_level`` needs, a few numbers per split.
    """
    ws = st.ws
    k, d = st.n_active, st.d
    a = st.level & 1
    hist = ws.hist_index ^ a
    # the level's tables as the search reads them (``advance_level`` keeps them on the host)
    ctrl = np.zeros(ws.arrays["ctrl"].shape[0], np.int64)
    ctrl[CTRL_N_FEATS + st.fcur] = st.n_feats
    ws._set(ws.itab[: ctrl.shape[0]], ctrl)
    ws._set(ws.arrays["nodes"][NODE_SUMS], np.stack([st.node_g, st.node_h]))  # one copy
    ws._set(ws.arrays[f"active{a}"][:k], st.active)
    ws.set_feats(st.fcur, st.feats[: st.n_feats])
    scal, pen, alw, usd = ws.set_params(penalty, allowed, used, split, int(budget))
    cat_slot, n_cat = split.categorical()
    v_slot, v_order = ws.categorical(cat_slot, n_cat)
    with be._phase("level"):
        be._launch(
            "search",
            be.kernels.search_kernel,
            be._grid_1d(k * d, 1),
            be.search_threads,
            ws.v[f"hist{hist}"],
            ws.v[f"hist{hist ^ 1}"],
            ws.v["bld"],
            False,
            ws.v["nodes"],
            ws.v[f"active{a}"],
            k,
            ws.v["feats2"],
            st.fcur,
            ws.v["ctrl"],
            ws.v["offset"],
            ws.view_of(split.n_bins),
            pen,
            alw,
            usd,
            scal,
            v_slot,
            v_order,
            ws.v["pf_f"],
            ws.v["pf_i"],
            True,
            ws.v["fmask2"],
            ws.v[f"active{1 - a}"],
            ws.v["admitted_now"],
            ws.rows_per_task,
            ws.v["dec_f"],
            ws.v["dec_i"],
            ws.v["spl"],
            ws.v["out_i"],
            ws.v["out_f"],
        )
    out = be._to_host(ws.out[: ws.field_base + N_OUT * k])
    res, fields = st.level_result(out, n_cat > 0)
    slot = np.flatnonzero(fields[OUT_FEATURE] >= 0).astype(np.int64)
    sf = fields[OUT_FEATURE][slot]
    is_cat = (np.asarray(cat_slot)[sf] >= 0) if n_cat else np.zeros(slot.shape[0], np.bool_)
    admitted_now = np.zeros(d, np.bool_)
    admitted_now[res.admitted] = True
    n_next = int(out[OUT_N_NEXT])
    if budget >= 0 and res.admitted.shape[0] >= budget:  # the kernel's rule: Omega's only
        nxt = np.flatnonzero(np.asarray(used, np.bool_) | admitted_now)
    else:
        nxt = st.feats[: st.n_feats]
    next_feats = np.zeros(d, np.int32)
    next_feats[:n_next] = nxt
    plan = SplitPlan(
        slot,
        sf,
        fields[OUT_BIN][slot],
        fields[OUT_MISSING_LEFT][slot] == 1,
        is_cat,
        res.cat_bits[slot],
        fields[OUT_G_LEFT][slot],
        fields[OUT_H_LEFT][slot],
        int(res.admitted.shape[0]),
        admitted_now,
        np.ones(k, np.bool_),
        next_feats,
        n_next,
        n_next == d,
        np.asarray(penalty, np.float64),
        split,
    )
    return res, plan
