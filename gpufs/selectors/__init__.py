"""One module per selection method; each class is a scikit-learn estimator and selector."""

from .controlburn import ControlBurnClassifier, ControlBurnRegressor
from .gbfs import GBFSClassifier, GBFSRegressor
from .stagewise import StagewiseClassifier, StagewiseRegressor

__all__ = [
    "ControlBurnClassifier",
    "ControlBurnRegressor",
    "GBFSClassifier",
    "GBFSRegressor",
    "StagewiseClassifier",
    "StagewiseRegressor",
]
