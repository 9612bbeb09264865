"""What every Dask estimator shares, whatever it fits: the single-process model behind it.

Owns the conversion between a Dask estimator and its single-process class (the first class
in its MRO defined outside ``gpufs.dask``: ``GBFSRegressor``, ``ControlBurnClassifier``, ...),
the model file (the single-process estimator's, so either class loads it), pickling without
the client, ``predict`` / ``predict_proba`` / ``transform`` on Dask collections (lazily,
partition by partition, with the single-process methods), and ``warm_start``'s key of a distributed
fit
(the data's Dask token, which the graph determines, instead of the single process's sums
over the rows). The fits live in ``_gbfs.py`` and ``_controlburn.py``.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.metaestimators import available_if

from ._data import _dask_kind
from ._predict import lazy_apply

#: Default seconds any one wait on the cluster may take.
DEFAULT_TIMEOUT = 600.0


#: Parameters that never change what a fit computes.
_NOT_IN_KEY = ("verbose", "warm_start", "n_jobs", "client", "timeout")


def data_token(*collections):
    """The Dask token of the fit's collections (``dask.base.tokenize``: from their graphs,
    without reading a row), which is what ``warm_start`` compares the data by."""
    from dask.base import tokenize

    return tokenize(*collections)


def warm_key(est, token, ignore=()):
    """What a Dask ``warm_start`` compares: every parameter but ``ignore`` and those that
    never change a fit (``verbose``, ``warm_start``, ``n_jobs``, ``client``, ``timeout``),
    and the data's token; None when ``random_state`` is not an int (nothing seeded can be
    reused)."""
    if not isinstance(est.random_state, numbers.Integral):
        return None
    from dask.base import tokenize

    params = []
    for name, value in sorted(est.get_params(deep=False).items()):
        if name in ignore or name in _NOT_IN_KEY:
            continue
        if value is not None and not isinstance(value, (str, numbers.Number)):
            value = tokenize(value)
        params.append((name, value))
    return ("dask", tuple(params), token)


def single_process_class(cls):
    """The single-process estimator class behind the Dask estimator class ``cls``."""
    return next(c for c in cls.__mro__ if not c.__module__.startswith("gpufs.dask"))


def as_single_process(est):
    """A copy of the fitted Dask estimator ``est`` as its single-process class, without
    ``client`` and ``timeout``; a Dask refit model inside (ControlBurn) is converted too."""
    cls = single_process_class(type(est))
    plain = cls.__new__(cls)
    plain.__dict__.update({k: v for k, v in est.__dict__.items() if k not in ("client", "timeout")})
    refit = plain.__dict__.get("refit_estimator_")
    if hasattr(refit, "to_single_process"):
        plain.refit_estimator_ = refit.to_single_process()
    return plain


def from_single_process(cls, plain):
    """The fitted single-process estimator ``plain`` as the Dask estimator class ``cls``."""
    est = cls.__new__(cls)
    est.__dict__.update(plain.__dict__)
    est.client, est.timeout = None, DEFAULT_TIMEOUT
    return est


def predict_dtype(est):
    """The dtype of ``predict``'s values: the labels' for a classifier, else float64."""
    return est.classes_.dtype if is_classifier(est) else np.dtype(np.float64)


def _single_process_has(method):
    """``available_if``'s check: the single-process class offers ``method`` (a regressor has
    no ``predict_proba``; ControlBurn's only when its refit model has one)."""

    def check(self):
        return hasattr(super(DaskEstimatorBase, self), method)

    return check


class DaskEstimatorBase:
    """The single-process model behind a Dask estimator: conversion, model file, pickling,
    and ``predict`` / ``predict_proba`` / ``transform`` on Dask collections."""

    def to_single_process(self):
        """The fitted model as the single-process estimator, without the client.

        Returns
        -------
        estimator
            An instance of the single-process class (``GBFSRegressor``,
            ``ControlBurnClassifier``, ...) with the same trees and attributes; a Dask refit
            model inside is converted too.
        """
        return as_single_process(self)

    def save_model(self, path):
        """Write the fitted model as a gpufs model file of the single-process estimator
        (load it with that class's ``load_model`` or this one's).

        Parameters
        ----------
        path : str or path-like
        """
        from ..io import model_io

        model_io.estimator_save_model(self.to_single_process(), path)

    @classmethod
    def load_model(cls, path, **kwargs):
        """A fitted model from a gpufs model file of the single-process estimator.

        Parameters
        ----------
        path : str or path-like
            What ``save_model`` (or the single-process estimator's) wrote.
        **kwargs
            Passed to the single-process estimator's ``load_model``.

        Returns
        -------
        estimator
            This Dask estimator class, ``client`` None (the current client).
        """
        return from_single_process(cls, single_process_class(cls).load_model(path, **kwargs))

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["client"] = None  # a pickled model never carries the client
        return state

    def predict(self, X):
        """Predictions of the model (for ControlBurn: of its refit model).

        Parameters
        ----------
        X : dask collection or array-like of shape (n_samples, n_features)
            A ``dask.array`` or ``dask.dataframe``, or in-memory data.

        Returns
        -------
        y_pred : dask collection or ndarray of shape (n_samples,)
            Lazy (partition by partition, no rows move) for a Dask collection; else as the
            single-process ``predict``.
        """
        if _dask_kind(X) is None:
            return super().predict(X)
        return lazy_apply(self, DaskEstimatorBase, X, "predict", dtype=predict_dtype(self))

    @available_if(_single_process_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities (for ControlBurn: of its refit model).

        Parameters
        ----------
        X : dask collection or array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : dask collection or ndarray of shape (n_samples, n_classes)
            Lazy for a Dask collection (a DataFrame with one column per class for a frame);
            else as the single-process ``predict_proba``.
        """
        if _dask_kind(X) is None:
            return super().predict_proba(X)
        return lazy_apply(
            self,
            DaskEstimatorBase,
            X,
            "predict_proba",
            width=len(self.classes_),
            columns=self.classes_,
        )

    def transform(self, X):
        """The selected columns of X.

        Parameters
        ----------
        X : dask collection or array-like of shape (n_samples, n_features)

        Returns
        -------
        X_selected : dask collection or array of shape (n_samples, n_selected_features)
            For a Dask collection, the same collection's columns (lazily); else as the
            single-process ``transform``.
        """
        kind = _dask_kind(X)
        if kind is None:
            return super().transform(X)
        idx = np.flatnonzero(self.get_support())
        if kind == "frame":
            return X[[X.columns[i] for i in idx]]
        return X[:, idx]
