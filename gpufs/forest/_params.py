"""How a ControlBurn forest is grown: :class:`ForestParams`, the constraints every field must
meet (shared with the ControlBurn estimators), per-tree feature subset sizes, and the
training-loss convergence rule that ends a round."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

from sklearn.utils._param_validation import StrOptions, validate_parameter_constraints

from .._params import int_range, real_range

__all__ = [
    "FOREST_PARAMETER_CONSTRAINTS",
    "ForestParams",
    "MAX_FOREST_DEPTH",
    "METHODS",
    "TREE_TYPES",
    "check_forest_params",
    "loss_converged",
]

METHODS = ("bagboost", "bag")
TREE_TYPES = ("full", "sparse", "single")
#: The grower's deepest tree (node arrays of 2**(d+1) - 1 entries).
MAX_FOREST_DEPTH = 16


def loss_converged(losses, n_tail: int = 5, tol: float = 1e-3) -> bool:
    """True when the last ``n_tail`` losses lie within a tube of width ``tol``.

    The rule of ControlBurn's section 3.2.1: needs at least ``n_tail`` losses, and
    ``max(losses[-n_tail:]) - min(losses[-n_tail:]) <= tol``.

    Parameters
    ----------
    losses : sequence of float
    n_tail : int, default=5
    tol : float, default=1e-3

    Returns
    -------
    bool
    """
    if len(losses) < n_tail:
        return False
    tail = losses[-n_tail:]
    return max(tail) - min(tail) <= tol


@dataclass(frozen=True)
class ForestParams:
    """How to grow the forest (see the package docstring).

    Parameters
    ----------
    method : {"bagboost", "bag"}, default="bagboost"
        Incremental depth bag-boosting or incremental depth bagging.
    tree_type : {"full", "sparse", "single"}, default="full"
        Plain trees, feature-sparse trees or single-feature trees.
    max_depth : int in [1, 16], default=10
        The deepest trees (bag: the last depth; bagboost: the most rounds).
    n_tail : int >= 1, default=5
        Length of the tail the convergence rule looks at.
    tol : float >= 0, default=1e-3
        Width of the convergence rule's tube.
    max_trees_per_round : int >= 1, default=100
        Cap on bag members per depth (bag) or round (bagboost).
    min_rounds : int >= 1, default=1
        bagboost: rounds grown before a non-positive OOB improvement may stop it.
    max_features : None, int, float in (0, 1], "sqrt" or "log2", default=None
        Features each tree may split on, drawn per tree ("full" and "sparse" trees).
    sparse_mu : float >= 0, default=0.1
        Price of a feature new to a "sparse" tree (root-SSE scaling).
    min_child_weight : float >= 0, default=1.0
        Least sum of in-bag weights (scaled to mean 1) in a child.
    cat_smooth, cat_l2 : float >= 0, default=10.0
    min_data_per_group : float >= 0, default=20.0
    max_cat_threshold : int in [1, 256], default=1
        LightGBM's four guards of a split over sorted categories
        (``gpufs.rules._categorical``; the first three are GBFS's defaults): a tree's split
        of a categorical column of more than 4 categories at the node sorts only categories
        of at least ``cat_smooth`` in-bag rows, by their smoothed mean, scores its children
        with ``cat_l2`` more L2, needs ``min_data_per_group`` rows on each side, and sends
        at most ``max_cat_threshold`` categories left: by default one, a one-vs-rest split
        (columns of at most 4 categories are split one-vs-rest anyway). Unguarded (0, 0, 0,
        256), or with GBFS's 32, the forest's set splits over the sorted categories fit a
        many-level noise column, and ControlBurn's lasso, which sees the trees' training
        fit, selected a 40- or 200-level random column over real signals (GBFS's answer,
        ``pool_ranking="heldout"``, ranks on held-out rows; the forest has no such ranking).
        No effect on numeric columns.
    honest_leaves : bool, default=False
        Honest leaf values (Wager and Athey, JASA 2018, section 2.4): a tree's splits are
        chosen on its in-bag rows and its leaf values are the weighted mean residual over
        out-of-bag rows (bagboost: one seeded half of them; the other half is the OOB
        stopping rule's). A leaf without such rows takes its parent's honest value. The
        trees' stored values and ``A`` both hold the honest values.
    oob_prune : float >= 0 or None, default=1.0
        Out-of-bag pruning of every tree (``_prune``; reduced-error pruning, Quinlan,
        "Simplifying decision trees", Int. J. Man-Machine Studies 27(3), 1987): bottom up, a
        split is kept only when it lowers the squared error of the tree's target on the rows
        its bootstrap left out by more than ``oob_prune`` standard errors of that saving;
        else its node becomes a leaf and the columns below it leave the tree. None: no
        pruning. Not used with ``honest_leaves`` (whose leaf values come from those rows).
    verbose : bool, default=False
        tqdm progress bar over trees.
    """

    method: str = "bagboost"
    tree_type: str = "full"
    max_depth: int = 10
    n_tail: int = 5
    tol: float = 1e-3
    max_trees_per_round: int = 100
    min_rounds: int = 1
    max_features: object = None
    sparse_mu: float = 0.1
    min_child_weight: float = 1.0
    cat_smooth: float = 10.0
    cat_l2: float = 10.0
    min_data_per_group: float = 20.0
    max_cat_threshold: int = 1
    honest_leaves: bool = False
    oob_prune: object = 1.0
    verbose: bool = False


#: The constraints of every ``ForestParams`` field (scikit-learn's parameter validation); the
#: ControlBurn estimators take theirs from here.
FOREST_PARAMETER_CONSTRAINTS = {
    "method": [StrOptions(set(METHODS))],
    "tree_type": [StrOptions(set(TREE_TYPES))],
    "max_depth": [int_range(1, MAX_FOREST_DEPTH)],
    "n_tail": [int_range(1)],
    "tol": [real_range(0)],
    "max_trees_per_round": [int_range(1)],
    "min_rounds": [int_range(1)],
    "max_features": [
        None,
        int_range(1),
        real_range(0, 1, closed="right"),
        StrOptions({"sqrt", "log2"}),
    ],
    "sparse_mu": [real_range(0)],
    "min_child_weight": [real_range(0)],
    "cat_smooth": [real_range(0)],
    "cat_l2": [real_range(0)],
    "min_data_per_group": [real_range(0)],
    "max_cat_threshold": [int_range(1, 256)],
    "honest_leaves": ["boolean"],
    "oob_prune": [real_range(0), None],
    "verbose": ["verbose"],
}


def check_forest_params(p: ForestParams) -> None:
    """Raise ``InvalidParameterError`` (a ValueError naming the field) for bad settings.

    Parameters
    ----------
    p : ForestParams
    """
    validate_parameter_constraints(
        FOREST_PARAMETER_CONSTRAINTS, asdict(p), caller_name="ForestParams"
    )
    if p.tree_type == "single" and p.max_features is not None:
        raise ValueError(
            "max_features does not apply to tree_type='single' (every tree already "
            "uses one feature); leave it None."
        )


def n_subset(max_features, d):
    """Features per tree for a valid ``max_features`` (None -> all ``d``)."""
    if max_features is None:
        return d
    if max_features == "sqrt":
        return max(1, int(math.sqrt(d)))
    if max_features == "log2":
        return max(1, int(math.log2(d))) if d > 1 else 1
    if isinstance(max_features, numbers.Integral):
        return min(int(max_features), d)
    return max(1, int(max_features * d))
