"""The parameter descriptions shared by the lasso's entry points, written once.

A docstring names a block as ``$data``, ``$datafit`` or ``$solver_options`` on a line of its
own (indented like the parameters around it); the decorator :data:`fill` puts the block there
(``gpufs._docstrings``). ``$problem``, ``$reweight`` and ``$solver`` are the fields of the
settings records (``_options``); the other blocks are the entry points' keywords that take them.
"""

from __future__ import annotations

from .._docstrings import filler

_BLOCKS = {
    "data": """\
A : ndarray of shape (n_samples, n_trees)
    Per-tree predictions on the training rows (numpy or cupy; used as float64).
y : ndarray of shape (n_samples,)
    Targets (in {0, 1} for ``loss="logistic"``).""",
    "problem": """\
loss : {"squared", "logistic"}, default="squared"
sample_weight : ndarray of shape (n_samples,) or None, default=None
    Row weights >= 0 with a positive sum.
fit_intercept : bool, default=True
    Include the free intercept b (see the package docstring).
sketch : {"gaussian", "count", "rows"} or None, default=None
    Row sketching (see the package docstring).
sketch_size : int or None, default=None
    Rows of the sketch; default min(n_samples, max(10 (n_trees + 1), 1000)).
random_state : int >= 0, numpy RandomState or Generator, or None, default=0
    Seed of the sketch (None draws a fresh, non-reproducible one).""",
    "reweight": """\
steps : int >= 0, default=0
    Reweighting steps after the plain lasso (see the package docstring): each one discounts
    the cost of every feature (or group) by how much weight the last solution's trees put on
    it (:func:`usage_discount`) and searches again; they stop early once no cost factor
    moves by more than 1e-3. 0: the plain lasso of ControlBurn's problem (2).
eps : float > 0, default=0.5
    The discount's ``eps``, relative to the largest usage.""",
    "solver": """\
tol : float > 0, default=1e-9
    Relative KKT tolerance.
max_iter : int >= 1, default=20000
    Cap on FISTA iterations, summed over working sets.""",
    # The entry points' keywords that take the records.
    "datafit": """\
datafit : Datafit, default=Datafit()
    The loss, row weights, intercept and sketch (:class:`Datafit`).""",
    "solver_options": """\
solver : SolverOptions, default=SolverOptions()
    Tolerance and iteration cap of every solve (:class:`SolverOptions`).""",
    "masks": """\
tree_feature_masks : ndarray of shape (n_trees, n_features), bool
    ``[i, j]`` is True when tree i splits on feature j.""",
    "costs": """\
costs : FeatureCosts, default=FeatureCosts()
    What features (or groups) cost (:class:`FeatureCosts`); every feature 1 by default.""",
    "threshold": """\
threshold : float >= 0, default=0.0
    A feature counts as selected when a tree with ``weight > threshold`` uses it.""",
    "reweighting": """\
reweight : Reweighting, default=Reweighting()
    The reweighting steps after the plain lasso (:class:`Reweighting`); none by default.""",
}


#: The decorator of the lasso's entry points.
fill = filler(_BLOCKS)
