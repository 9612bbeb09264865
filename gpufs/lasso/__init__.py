"""The selection problem of ControlBurn: a non-negative weighted lasso over tree weights.

Owns: the tree-weight lasso of Liu, Xie, Udell, "ControlBurn: Feature Selection by Sparse
Forests", KDD 2021 (section 3.1), and everything around it that does not touch trees: the
per-tree costs ``u`` (feature costs and feature groups, sections 3.3.1-3.3.2), the solver, row
sketching (3.3.3), ``lambda_max``, warm-started lambda paths and the bisection on lambda that
reaches exactly ``k`` selected features (4.2.1). The forest is grown elsewhere; this module
only sees its per-tree predictions ``A``, which features each tree uses and which output it
predicts. The entry points take their settings as small records (``_options``): the
:class:`Datafit`, the :class:`FeatureCosts`, the :class:`KSearch`, the :class:`Reweighting`
and the :class:`SolverOptions`.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from ._costs import REWEIGHT_EPS, selected_features, tree_costs, usage_discount
from ._linalg import SKETCHES
from ._models import SmoothModel
from ._options import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    LOSSES,
    Datafit,
    FeatureCosts,
    KSearch,
    Reweighting,
    SolverOptions,
)
from ._problem import LassoProblem, forest_lasso_problem
from ._results import LassoResult, Selection, SelectionsByK, UnreachableKError
from ._search import select_at_lambda, select_k, selections_by_k
from ._solver import TreeLasso, lambda_max, lasso_path, solve_lasso

__all__ = [
    "DEFAULT_MAX_ITER",
    "DEFAULT_TOL",
    "Datafit",
    "FeatureCosts",
    "KSearch",
    "LOSSES",
    "LassoProblem",
    "LassoResult",
    "REWEIGHT_EPS",
    "Reweighting",
    "SKETCHES",
    "Selection",
    "SelectionsByK",
    "SmoothModel",
    "SolverOptions",
    "TreeLasso",
    "UnreachableKError",
    "lambda_max",
    "forest_lasso_problem",
    "lasso_path",
    "select_at_lambda",
    "select_k",
    "selected_features",
    "selections_by_k",
    "solve_lasso",
    "tree_costs",
    "usage_discount",
]

# The names these had before (``gpufs.path`` has a SelectionPath and a selection_path of
# another meaning); kept so that code written against them still runs.
SelectionPath = SelectionsByK
selection_path = selections_by_k
