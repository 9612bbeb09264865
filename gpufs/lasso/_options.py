"""The settings records of the lasso's entry points, each checked once when it is made.

:class:`Datafit` (loss, row weights, intercept, sketch), :class:`FeatureCosts` (what features
and groups cost), :class:`KSearch` (the lambda search for k features), :class:`Reweighting`
(the reweighting steps) and :class:`SolverOptions` (tolerance, iteration cap) replace the long
keyword lists of :func:`gpufs.lasso.select_k` and its siblings, the way skglm passes a datafit
and a solver object and R's ``glm`` a ``control`` list; every default is the old keyword's.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

import numpy as np

from . import _docs
from ._costs import REWEIGHT_EPS
from ._linalg import _check_sketch_kind

__all__ = [
    "DEFAULT_MAX_ITER",
    "DEFAULT_TOL",
    "LOSSES",
    "Datafit",
    "FeatureCosts",
    "KSearch",
    "Reweighting",
    "SolverOptions",
]

LOSSES = ("squared", "logistic")
#: Default relative KKT tolerance (see the package docstring).
DEFAULT_TOL = 1e-9
DEFAULT_MAX_ITER = 20_000


def _require(ok, name, what, value):
    """The one form of the records' checks: ``ValueError("<name> must be <what>, got ...")``."""
    if not ok:
        raise ValueError(f"{name} must be {what}, got {value!r}")


def _is_int(value, least):
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and value >= least


def _is_real(value):
    """A finite real number (not a bool): inf and nan are refused where they are made."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def _is_bool(value):
    """True or False (numpy's bool too); not 1, "yes" or None."""
    return isinstance(value, (bool, np.bool_))


def _is_seed(value):
    """scikit-learn's ``check_random_state`` seeds, and numpy Generators: None, an int in
    [0, 2**32) (not a bool), a ``RandomState`` or a ``Generator``."""
    if value is None or isinstance(value, (np.random.RandomState, np.random.Generator)):
        return True
    return _is_int(value, 0) and value < 2**32


def _keywords(record):
    """A record's fields as keywords (``dataclasses.asdict`` would copy the arrays)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@_docs.fill
@dataclass(frozen=True, eq=False)
class Datafit:
    """How the rows enter the lasso: the loss, the row weights, the intercept and the sketch.

    Parameters
    ----------
    $problem
    """

    loss: str = "squared"
    sample_weight: object = None
    fit_intercept: bool = True
    sketch: object = None
    sketch_size: object = None
    random_state: object = 0

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        _require(
            _is_bool(self.fit_intercept),
            "fit_intercept",
            "a bool (True or False)",
            self.fit_intercept,
        )
        _require(
            _is_seed(self.random_state),
            "random_state",
            "None, an int in [0, 2**32), a numpy RandomState or a numpy Generator",
            self.random_state,
        )
        _check_sketch_kind(self.sketch, self.loss)

    def rng(self):
        """The sketch's random generator: ``random_state`` itself when it is a Generator;
        from a RandomState, a Generator seeded by one draw of it (scikit-learn's use of a
        RandomState as a seed source); else ``numpy.random.default_rng(random_state)``.

        Returns
        -------
        numpy.random.Generator
        """
        rs = self.random_state
        if isinstance(rs, np.random.Generator):
            return rs
        if isinstance(rs, np.random.RandomState):
            return np.random.default_rng(int(rs.randint(0, 2**32, dtype=np.int64)))
        return np.random.default_rng(rs)


@dataclass(frozen=True, eq=False)
class FeatureCosts:
    """What the trees of a forest cost: the arguments of :func:`gpufs.lasso.tree_costs`.

    They are checked against the forest's masks when the costs are computed (their lengths
    depend on the number of features).

    Parameters
    ----------
    feature_costs : array-like of shape (n_features,) or None, default=None
        Costs >= 0; None: every feature costs 1.
    groups : array-like of shape (n_features,) of int >= 0, or None, default=None
        Group label of each feature; None: every feature its own group.
    group_costs : array-like of shape (n_groups,) or None, default=None
        Costs >= 0 indexed by group label.
    """

    feature_costs: object = None
    groups: object = None
    group_costs: object = None


@dataclass(frozen=True)
class KSearch:
    """The search on lambda for a number of selected features (ControlBurn, section 4.2.1).

    Parameters
    ----------
    lambda_min_ratio : float in (0, 1) or None, default=None
        No lambda below ``lambda_min_ratio * lambda_max`` is tried; None: the entry point's
        own default (1e-6 for :func:`gpufs.lasso.select_k`, 1e-4 for the grid of
        :func:`gpufs.lasso.selections_by_k`).
    bisect_rtol : float >= 0, default=1e-7
        A bisection stops when its bracket's ratio is within ``1 + bisect_rtol``.
    max_bisect : int >= 0, default=60
        Bisection steps (per k) at most.
    """

    lambda_min_ratio: object = None
    bisect_rtol: float = 1e-7
    max_bisect: int = 60

    def __post_init__(self):
        r, rtol = self.lambda_min_ratio, self.bisect_rtol
        _require(r is None or (_is_real(r) and 0 < r < 1), "lambda_min_ratio", "in (0, 1)", r)
        _require(_is_real(rtol) and rtol >= 0, "bisect_rtol", "a number >= 0 (finite)", rtol)
        _require(_is_int(self.max_bisect, 0), "max_bisect", "an integer >= 0", self.max_bisect)

    def ratio(self, default):
        """``lambda_min_ratio``, or ``default`` where it is None.

        Parameters
        ----------
        default : float
            The entry point's own default.

        Returns
        -------
        float
        """
        return default if self.lambda_min_ratio is None else self.lambda_min_ratio


@_docs.fill
@dataclass(frozen=True)
class Reweighting:
    """The reweighting steps after the plain lasso (see the package docstring).

    Parameters
    ----------
    $reweight
    """

    steps: int = 0
    eps: float = REWEIGHT_EPS

    def __post_init__(self):
        # named as the keywords these fields replace (and ControlBurn's reweight_steps)
        _require(_is_int(self.steps, 0), "reweight_steps", "an integer >= 0", self.steps)
        _require(
            _is_real(self.eps) and self.eps > 0, "reweight_eps", "a number > 0 (finite)", self.eps
        )


@_docs.fill
@dataclass(frozen=True)
class SolverOptions:
    """When a lasso solve stops.

    Parameters
    ----------
    $solver
    """

    tol: float = DEFAULT_TOL
    max_iter: int = DEFAULT_MAX_ITER

    def __post_init__(self):
        _require(_is_real(self.tol) and self.tol > 0, "tol", "a positive number (finite)", self.tol)
        _require(_is_int(self.max_iter, 1), "max_iter", "a positive integer", self.max_iter)
