"""What every gpufs selector shares: one base class for GBFS, stagewise and ControlBurn.

Owns the estimator contract that does not depend on the method: parameter constraints, the
input door (X, y and sample weights read through ``gpufs.data._input``, targets encoded), validation
data and early stopping (``eval_set`` / ``validation_fraction``, ``EarlyStopping``), names and
the selector interface (``transform``, ``get_support``, ...), ``selection_path_``, and
``save_model`` / ``load_model`` (through ``gpufs.io.model_io``).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._device import device_of, is_cupy_array, like, namespace_of, resolve_device, to_host
from .._params import DEVICE_CONSTRAINT, int_range, real_range
from .._warnings import warn_from_caller
from ..backends import get_backend
from ..data._category_codes import plain_scalar
from ..data._input import (
    _frame,
    check_classification_labels,
    check_regression_target,
    check_sample_weight,
    check_X,
    check_y,
    encode_classes,
    encode_known_classes,
)
from ..io import model_io

__all__ = [
    "BaseEstimator",
    "ClassifierTargetMixin",
    "DEVICE_CONSTRAINT",
    "EarlyStopping",
    "FitData",
    "GPUFSSelectorMixin",
    "RegressorTargetMixin",
    "SelectorBase",
    "FeatureBudget",
    "auto_k",
    "check_weighted_sides",
    "feature_budget",
    "input_device",
    "int_range",
    "real_range",
    "resolve_k",
    "validation_split",
]


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def eval_triples(eval_set, sample_weight_eval_set):
    """``eval_set`` and ``sample_weight_eval_set`` as a list of ``(X_val, y_val, w_val)``,
    the structure checked (XGBoost's and LightGBM's convention): ``eval_set`` is a ``(X, y)``
    tuple or a non-empty list of such pairs; ``sample_weight_eval_set`` is None or a list with
    one weight array (or None) per pair. The arrays themselves are not checked here."""
    if eval_set is None:
        if sample_weight_eval_set is not None:
            raise ValueError("sample_weight_eval_set was given without eval_set.")
        return []
    pairs = [eval_set] if isinstance(eval_set, tuple) else eval_set
    if (
        not isinstance(pairs, list)
        or not pairs
        or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs)
    ):
        raise ValueError(
            "eval_set must be a pair (X_val, y_val) or a non-empty list of such pairs."
        )
    weights = sample_weight_eval_set
    if weights is None:
        weights = [None] * len(pairs)
    elif not isinstance(weights, (list, tuple)) or len(weights) != len(pairs):
        raise ValueError(
            f"sample_weight_eval_set must be a list with one entry (an array "
            f"or None) per eval_set pair: {len(pairs)} expected."
        )
    return [(Xv, yv, wv) for (Xv, yv), wv in zip(pairs, weights)]


@dataclass
class FitData:
    """The checked training data of one ``fit`` (see :meth:`SelectorBase._prepare_fit`).

    Attributes
    ----------
    backend : CPUBackend or GPUBackend
        The fitting device's backend (``device`` is its name).
    xp : module
        numpy or cupy, the backend's array namespace.
    X : ndarray of shape (n_samples, n_features)
        On ``device``, dtype as asked.
    y : ndarray of shape (n_samples,)
        Encoded target: float64 for regressors, int32 class codes 0..n_classes-1 for
        classifiers, on ``device``.
    y_input : ndarray of shape (n_samples,)
        The target as given (checked, not encoded), on ``device``.
    sample_weight : ndarray of shape (n_samples,), float64, or None
    seed : int
        Drawn once per fit from ``random_state``; seeds everything random in the fit.
    """

    backend: object
    xp: object
    X: object
    y: object
    y_input: object
    sample_weight: object
    seed: int

    @property
    def device(self) -> str:
        """{"cpu", "gpu"}: the fitting device, the backend's ``name``."""
        return self.backend.name


# --------------------------------------------------------------------------------------------
# Target encoding
# --------------------------------------------------------------------------------------------


class RegressorTargetMixin:
    """Target encoding of regressors: a finite float64 target."""

    _stratify_validation = False

    def _encode_target(self, y):
        """y (n_samples,) -> float64 (n_samples,) on y's device."""
        return check_regression_target(y)

    def _encode_validation_target(self, y, what):
        return check_regression_target(y)


class ClassifierTargetMixin:
    """Target encoding of classifiers: labels -> ``classes_`` and codes 0..n_classes-1."""

    _stratify_validation = True

    def _encode_target(self, y):
        """Labels (n_samples,) -> int32 codes on y's device; sets ``classes_``.

        Rejects NaN / infinity, labels of mixed types and continuous targets with a message
        that says so, and a single class.
        """
        check_classification_labels(y)
        classes, codes = encode_classes(y)
        self.classes_ = classes
        return codes

    def _encode_validation_target(self, y, what):
        """Labels of a validation set -> codes of ``classes_``; unseen labels are an error."""
        return encode_known_classes(y, self.classes_, what)

    def _decode_classes(self, codes):
        """Class codes (n_samples,) -> labels from ``classes_``: on the codes' device when the
        labels are numeric (cupy codes give a cupy array), else a host array (cupy holds no
        strings or objects)."""
        if is_cupy_array(codes):
            if self.classes_.dtype.kind in "biuf":
                return namespace_of(codes).asarray(self.classes_)[codes]
            codes = to_host(codes)
        return self.classes_[codes]


# --------------------------------------------------------------------------------------------
# Validation data and early stopping
# --------------------------------------------------------------------------------------------


def _on_device(backend, a):
    """``a`` (an array or None) on ``backend``'s device."""
    return None if a is None else backend.to_device(a)


def _warn_weightless_classes(classes, codes, w, xp):
    """Say when every row of a class weighs 0: the fit is sound, but it never predicts that
    class (its probability is 0), which a user who zeroed weights by mistake should hear."""
    per = to_host(xp.bincount(codes.astype(xp.int64), weights=w, minlength=len(classes)))
    empty = [plain_scalar(c) for c in classes[per == 0]]
    if empty:
        many = len(empty) > 1
        warn_from_caller(
            f"sample_weight is 0 on every row of class{'es' if many else ''} "
            f"{', '.join(repr(c) for c in empty[:5])}{' ...' if len(empty) > 5 else ''}: "
            f"the model never predicts {'them' if many else 'it'} (probability 0).",
            UserWarning,
        )


def check_weighted_sides(validation_fraction, sides):
    """ValueError where a side of the ``validation_fraction`` split holds no row of positive
    sample weight: a fit there has no mean to start from, a validation loss is 0 / 0.

    Parameters
    ----------
    validation_fraction : float
    sides : [(n_training, n_weighted_training), (n_validation, n_weighted_validation)]
    """
    total = sum(int(k) for _, k in sides)
    for (n, k), side in zip(sides, ("training", "validation")):
        if int(k) == 0:
            raise ValueError(
                f"validation_fraction={validation_fraction}: the {int(n)} {side} rows it drew "
                f"all have sample weight 0 (only {total} of {sum(int(m) for m, _ in sides)} "
                "rows weigh anything); pass eval_set=(X_val, y_val) instead, or give more "
                "rows a weight."
            )


def validation_split(n_samples, validation_fraction, seed, stratify=None):
    """Held-out rows for ``validation_fraction``: the one rule of every gpufs estimator.

    ``ceil(validation_fraction * n_samples)`` rows are drawn by scikit-learn's
    ``train_test_split`` with ``random_state=seed``, stratified by ``stratify`` (class codes,
    for classifiers) when every class has at least two rows; otherwise (a class with a single
    row) the split is not stratified and a UserWarning says so.

    Parameters
    ----------
    n_samples : int
    validation_fraction : float in (0, 1)
    seed : int
    stratify : ndarray of shape (n_samples,) or None
        Class codes (host or device).

    Returns
    -------
    train, validation : ndarray of shape (n_train,) and (n_val,), int64
        Sorted host row indices.
    """
    from sklearn.model_selection import train_test_split

    n_val = math.ceil(validation_fraction * n_samples)
    if n_val < 1 or n_samples - n_val < 1:
        raise ValueError(
            f"validation_fraction={validation_fraction} leaves {n_val} validation "
            f"and {n_samples - n_val} training rows out of {n_samples}; both need "
            "at least one row."
        )
    idx = np.arange(n_samples)
    strat = None if stratify is None else to_host(stratify)
    if strat is not None and np.bincount(strat.astype(np.int64)).min(initial=2) < 2:
        warn_from_caller(
            "validation_fraction: a class has a single row, so the validation split "
            "is not stratified by class.",
            UserWarning,
        )
        strat = None
    try:
        tr, va = train_test_split(idx, test_size=n_val, random_state=seed, stratify=strat)
    except ValueError:
        if strat is None:
            raise
        # Fewer validation rows than classes: a stratified split cannot hold every class.
        warn_from_caller(
            "validation_fraction: too few validation rows to hold every class, so "
            "the validation split is not stratified by class.",
            UserWarning,
        )
        tr, va = train_test_split(idx, test_size=n_val, random_state=seed)
    return np.sort(tr), np.sort(va)


class EarlyStopping:
    """Stop when the watched validation loss has not improved for ``patience`` rounds.

    A round improves when its loss is below the best so far by more than ``tol``. The model
    is then cut back to the best round (``best_round``; 0 means the model before any round).

    Parameters
    ----------
    patience : int or None
        ``n_iter_no_change``; None never stops.
    tol : float, default=0.0
        Least improvement that counts.
    """

    def __init__(self, patience, tol=0.0):
        self.patience = patience
        self.tol = float(tol)
        self.best_loss = math.inf
        self.best_round = 0
        self._rounds = 0
        self._since_best = 0

    def start(self, loss):
        """Record the loss of the model before any round (round 0)."""
        self.best_loss, self.best_round = float(loss), 0

    def update(self, loss) -> bool:
        """Record the loss after the next round; True when training should stop."""
        self._rounds += 1
        if loss < self.best_loss - self.tol:
            self.best_loss, self.best_round, self._since_best = float(loss), self._rounds, 0
        else:
            self._since_best += 1
        return self.patience is not None and self._since_best >= self.patience


# --------------------------------------------------------------------------------------------
# The selector interface
# --------------------------------------------------------------------------------------------


def resolve_k(n_features_to_select, n_features):
    """The number of features ``n_features_to_select`` asks for, the same in every family.

    An int is that many; a float in (0, 1] is that fraction of the ``n_features`` columns,
    rounded down but at least 1 (as scikit-learn's ``RFE`` and ``SequentialFeatureSelector``
    round it); None stays None (the method's own stopping rule).

    Parameters
    ----------
    n_features_to_select : int, float in (0, 1] or None
    n_features : int

    Returns
    -------
    int or None

    Examples
    --------
    >>> resolve_k(3, 10), resolve_k(0.25, 10), resolve_k(0.01, 10), resolve_k(None, 10)
    (3, 2, 1, None)
    """
    k = n_features_to_select
    if k is None:
        return None
    if isinstance(k, numbers.Integral):
        return int(k)
    return max(1, int(k * n_features))


@dataclass(frozen=True)
class FeatureBudget:
    """``n_features_to_select`` (with ``tol``) resolved once per fit against the columns.

    Parameters
    ----------
    k : int or None
        The features asked for: ``resolve_k`` of an int or a fraction; for "auto" without
        ``tol``, half the columns (scikit-learn's rule); None for None (no budget) and for
        "auto" with ``tol`` (a first fit decides, ``auto_k``).
    auto : bool
        ``n_features_to_select="auto"``.
    tol : float or None
        "auto"'s least decrease of the loss a further feature must bring (None without).
    """

    k: int | None
    auto: bool = False
    tol: float | None = None

    @property
    def asked(self):
        """The k given as a number (None for "auto" and for no budget): GT-GBM's default
        number of candidates."""
        return None if self.auto else self.k

    @property
    def needs_auto_fit(self):
        """ "auto" with ``tol``: k comes from a first, unbudgeted fit."""
        return self.auto and self.tol is not None


def feature_budget(n_features_to_select, tol, n_features, *, warn=True):
    """The ``FeatureBudget`` of a fit.

    Parameters
    ----------
    n_features_to_select : int, float in (0, 1], "auto" or None
    tol : float or None
    n_features : int
    warn : bool, default=True
        Warn when k is above ``n_features`` (False: the fit already did, before its work).

    Returns
    -------
    FeatureBudget

    Examples
    --------
    >>> feature_budget(0.25, None, 10)
    FeatureBudget(k=2, auto=False, tol=None)
    >>> feature_budget("auto", None, 10), feature_budget("auto", 0.01, 10).needs_auto_fit
    (FeatureBudget(k=5, auto=True, tol=None), True)

    An int k above ``n_features`` warns (``SelectionWarning``) and becomes ``n_features``:
    every family then selects all the features it can use.
    """
    if n_features_to_select == "auto":
        if tol is None:
            return FeatureBudget(max(1, n_features // 2), auto=True)
        return FeatureBudget(None, auto=True, tol=float(tol))
    k = resolve_k(n_features_to_select, n_features)
    if k is not None and k > n_features:
        # one rule for every family, before any work: warn and select every feature
        from .._warnings import SelectionWarning

        if warn:
            warn_from_caller(
                f"n_features_to_select={k} is larger than the number of features in "
                f"X ({n_features}): selecting all {n_features} (those that the "
                "method can use).",
                SelectionWarning,
            )
        k = int(n_features)
    return FeatureBudget(k)


def auto_k(losses, tol):
    """``n_features_to_select="auto"`` with ``tol``: how many features to keep.

    ``losses[j]`` is the loss once features 0..j had entered, in the order they entered. The
    first feature is always kept; feature j is kept while ``losses[j - 1] - losses[j] > tol``
    (the rule of scikit-learn's ``SequentialFeatureSelector``, on a loss instead of a score).

    Parameters
    ----------
    losses : sequence of float
    tol : float >= 0

    Returns
    -------
    int
        0 only when ``losses`` is empty.

    Examples
    --------
    >>> auto_k([0.9, 0.5, 0.45, 0.44, 0.2], tol=0.02)
    3
    """
    k = 1 if len(losses) else 0
    while k < len(losses) and float(losses[k - 1]) - float(losses[k]) > tol:
        k += 1
    return k


#: What to change when a fit selected no feature (the fit's warning, transform's and the CLI's).
_ZERO_FEATURE_ADVICE = (
    "Ask for the number of features you want with n_features_to_select "
    "(command line: -k), or lower the method's price of a feature (GBFS: "
    "mu; ControlBurn: alpha; stagewise: tol)."
)


#: Predictions run where the input lives: "gpu" for cupy / cudf, else "cpu".
input_device = device_of


class GPUFSSelectorMixin(SelectorMixin):
    """SelectorMixin whose ``transform`` keeps numpy/cupy/pandas/cudf as they came in."""

    def _get_support_mask(self):
        check_is_fitted(self, "selected_features_")
        support = getattr(self, "support_", None)
        if support is None:  # a model loaded from a file keeps only the selection
            support = np.zeros(self.n_features_in_, dtype=bool)
            support[np.asarray(self.selected_features_, dtype=np.int64)] = True
        return support

    def transform(self, X):
        """The selected columns of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            numpy, pandas, cupy, cudf, polars or pyarrow.

        Returns
        -------
        X_selected : array or table of shape (n_samples, n_selected_features)
            The kind of X: a table (pandas, polars, pyarrow, cudf) keeps its columns as they
            are (categorical and string columns too), cupy stays cupy, else an ndarray; under
            scikit-learn's ``set_output(transform="pandas" / "polars")`` a table of that
            library, and under ``set_output(transform="default")`` an ndarray, as
            scikit-learn's selectors return (string columns as objects). Columns keep their
            original order (as ``get_support`` reports them); ``selected_features_`` gives
            the order of selection.
        """
        check_is_fitted(self, "selected_features_")
        allow_nan = self.__sklearn_tags__().input_tags.allow_nan
        checked = check_X(self, X, device=device_of(X), reset=False, allow_nan=allow_nan)
        idx = np.flatnonzero(self._get_support_mask())
        if idx.size == 0:
            # scikit-learn's SelectorMixin: an empty selection warns and gives (n_samples, 0).
            warn_from_caller(
                "No features were selected: transform returns an array with no "
                "columns. " + _ZERO_FEATURE_ADVICE,
                UserWarning,
            )
        frame = _frame(X)
        if frame is not None and idx.size == 0:
            # A table of no columns keeps its rows only in pandas (polars and pyarrow tables
            # without columns have no rows): pandas stays pandas, the others give (n, 0).
            if type(X).__module__.split(".")[0] == "pandas":
                return X.iloc[:, []]
            return np.empty((len(frame), 0))
        if frame is not None:  # the selected columns of the table, as they are
            # by position: names may be integers (pd.DataFrame(ndarray)), which select() reads
            # as expressions, or repeated
            out = frame[:, idx.tolist()]
            kind = getattr(self, "_sklearn_output_config", {}).get("transform", "default")
            if kind == "pandas":
                return out.to_pandas()
            if kind == "polars":
                return out.to_polars()
            if hasattr(self, "_sklearn_output_config") and kind == "default":
                return out.to_numpy()  # asked for by name: scikit-learn's default, an ndarray
            return out.to_native()
        if is_cupy_array(X):
            return X[:, like(idx, X)]
        arr = np.asarray(X)
        if arr.dtype.kind == "O" and getattr(self, "category_codes_", None) is None:
            arr = checked  # numbers given as objects: as numbers (categories stay as given)
        return arr[:, idx]

    @property
    def selected_feature_names_(self):
        """Names of ``selected_features_`` (from ``feature_names_in_``, else x0, x1, ...)."""
        check_is_fitted(self, "selected_features_")
        return self._feature_names()[self.selected_features_]

    def _feature_names(self):
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = np.array([f"x{i}" for i in range(self.n_features_in_)], dtype=object)
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


class SelectorBase(GPUFSSelectorMixin, BaseEstimator):
    """Base class of every gpufs selector (``docs/module_notes.rst``).

    Subclasses declare ``_parameter_constraints``, decorate ``fit`` with scikit-learn's
    ``_fit_context`` and combine this class with :class:`ClassifierTargetMixin` or
    :class:`RegressorTargetMixin`. A fitted selector sets ``support_``,
    ``selected_features_`` (in the order of selection) and ``selection_path_``.
    """

    _parameter_constraints: dict = {}

    # --- persistence: the model file format and its checks live in gpufs.io.model_io --------
    save_model = model_io.estimator_save_model
    load_model = classmethod(model_io.estimator_load_model)

    # --- the input door -----------------------------------------------------------------
    def _prepare_fit(self, X, y, sample_weight, *, dtype="float", allow_nan=True):
        """Check the training data on the fitting device and encode the target.

        ``dtype`` is ``check_X``'s: "float" keeps float32 and float64 data as they are.
        Returns a :class:`FitData`. Sets ``n_features_in_`` and ``feature_names_in_``.
        """
        device = resolve_device(self.device)
        backend = get_backend(device)
        Xc = check_X(
            self,
            X,
            device=device,
            reset=True,
            dtype=dtype,
            allow_nan=allow_nan,
            **self._categorical_args(),
        )
        n = Xc.shape[0]
        y_input = check_y(y, n, device=device)
        # The target and the weights go where X went (a host y beside a device X): the fit
        # indexes all three with one device row index (exact k's folds, validation rows), and
        # the GPU's round kernel would otherwise copy a host y to the device every round.
        yc = backend.to_device(self._encode_target(y_input))
        w = _on_device(backend, check_sample_weight(sample_weight, n, device=device))
        if w is not None and isinstance(self, ClassifierTargetMixin):
            _warn_weightless_classes(self.classes_, yc, w, backend.xp)
        rng = check_random_state(getattr(self, "random_state", None))
        seed = int(rng.randint(np.iinfo(np.int32).max))
        return FitData(
            backend=backend, xp=backend.xp, X=Xc, y=yc, y_input=y_input, sample_weight=w, seed=seed
        )

    def _categorical_args(self):
        """``check_X``'s categorical arguments at fit: the estimator's
        ``categorical_features`` (None for estimators without it) and its ``max_bins`` (the
        most codes, hence bins, of a categorical column)."""
        return {
            "categorical_features": getattr(self, "categorical_features", None),
            "max_categories": int(getattr(self, "max_bins", 255)),
        }

    @property
    def is_categorical_(self):
        """bool (``n_features_in_``,): the columns fitted as categorical features."""
        check_is_fitted(self, "n_features_in_")
        codes = getattr(self, "category_codes_", None)
        if codes is None:
            return np.zeros(self.n_features_in_, dtype=bool)
        return codes.is_categorical

    # --- validation data ----------------------------------------------------------------
    def _eval_sets(self, eval_set, sample_weight_eval_set, data, *, dtype="float", allow_nan=True):
        """The checked validation pairs: a list of ``(X, y_encoded, sample_weight)``.

        ``eval_set`` is a ``(X, y)`` tuple or a list of such pairs;
        ``sample_weight_eval_set`` is None or a list with one weight array (or None) per pair.
        """
        pairs = eval_triples(eval_set, sample_weight_eval_set)
        out = []
        for i, (Xv, yv, wv) in enumerate(pairs):
            what = "eval_set" if len(pairs) == 1 else f"eval_set[{i}]"
            try:
                Xc = check_X(
                    self, Xv, device=data.device, reset=False, dtype=dtype, allow_nan=allow_nan
                )
                yv = check_y(yv, Xc.shape[0], device=data.device)
                wc = check_sample_weight(wv, Xc.shape[0], device=data.device)
            except ValueError as e:
                # the input door's messages name no argument: say which pair it was (an empty
                # one otherwise reads as scikit-learn's "Found array with 0 sample(s)")
                raise ValueError(f"{what}: {e}") from e
            yc = data.backend.to_device(self._encode_validation_target(yv, what))
            out.append((Xc, yc, _on_device(data.backend, wc)))
        return out

    def _validation_rows(self, data):
        """``(train, validation)`` host row indices for ``validation_fraction``; a ValueError
        where either side holds no sample weight (no mean to start from, or a validation loss
        of 0 / 0)."""
        strat = data.y if self._stratify_validation else None
        tr, va = validation_split(data.X.shape[0], self.validation_fraction, data.seed, strat)
        if data.sample_weight is not None:
            w = np.asarray(to_host(data.sample_weight), dtype=np.float64)
            check_weighted_sides(
                self.validation_fraction,
                [(tr.shape[0], np.count_nonzero(w[tr])), (va.shape[0], np.count_nonzero(w[va]))],
            )
        return tr, va

    def _check_validation_params(self, eval_set):
        """The rules shared by every family for ``eval_set``, ``validation_fraction`` and
        ``n_iter_no_change``."""
        if eval_set is not None and self.validation_fraction is not None:
            raise ValueError("give either validation_fraction or eval_set to fit, not both.")
        if (
            self.n_iter_no_change is not None
            and eval_set is None
            and self.validation_fraction is None
        ):
            raise ValueError(
                "n_iter_no_change needs validation data: pass eval_set=(X_val, "
                "y_val) to fit or set validation_fraction."
            )

    # --- results ------------------------------------------------------------------------
    def _set_support(self, selected):
        """Set ``selected_features_`` (int64, in order of selection) and ``support_``."""
        self.selected_features_ = np.asarray(selected, dtype=np.int64)
        self.support_ = np.zeros(self.n_features_in_, dtype=bool)
        self.support_[self.selected_features_] = True

    def _set_selection_path(self, path, **entry):
        """Set ``selection_path_`` from a ``gpufs.path.SelectionPath``: "k" (1, 2, ...),
        "features" (indices in the order they entered), "names", the ``entry`` lists given
        (where each feature entered: "entry_tree", "entry_round", ...), and "train_loss" /
        "val_loss" (None without validation data) once each had entered."""
        self.selection_path_ = {
            "k": list(path.n_features),
            "features": self.selected_features_.tolist(),
            "names": list(path.features),
            **entry,
            "train_loss": list(path.train_loss),
            "val_loss": None if path.val_loss is None else list(path.val_loss),
        }


def _deprecated_validation_keywords(
    X_val, y_val, sample_weight_val, eval_set, sample_weight_eval_set
):
    """Map the old ``X_val=`` / ``y_val=`` / ``sample_weight_val=`` keywords to ``eval_set``
    with a FutureWarning."""
    if X_val is None and y_val is None and sample_weight_val is None:
        return eval_set, sample_weight_eval_set
    warn_from_caller(
        "X_val, y_val and sample_weight_val are deprecated and will be removed: pass "
        "eval_set=(X_val, y_val) and sample_weight_eval_set=[sample_weight_val] "
        "instead.",
        FutureWarning,
    )
    if eval_set is not None:
        raise ValueError("give either eval_set or the deprecated X_val/y_val, not both.")
    if X_val is None or y_val is None:
        raise ValueError("X_val and y_val must be given together.")
    return (X_val, y_val), (None if sample_weight_val is None else [sample_weight_val])
