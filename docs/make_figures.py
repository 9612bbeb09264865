"""Draw the figures of the user guide into docs/_static (run by hand; the PNGs are committed).

    python docs/make_figures.py

The docs build only includes the PNGs, so building the docs never fits a model. Rerun this
script when the methods or the plotting functions change.
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from gpufs import GBFSClassifier, StagewiseClassifier  # noqa: E402
from gpufs.path import mu_path, plot_path  # noqa: E402
from gpufs.plotting import plot_stagewise  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_static")


def main():
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X_train, X_val, y_train, y_val = train_test_split(
        X, y, test_size=0.3, random_state=0, stratify=y
    )
    points = mu_path(
        GBFSClassifier(n_estimators=100, device="cpu", random_state=0),
        X_train,
        y_train,
        mus=[0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.0],
        X_val=X_val,
        y_val=y_val,
    )
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    plot_path(points, ax=ax, label="GBFS, breast cancer")
    ax.set_ylabel("validation accuracy")
    fig.savefig(os.path.join(HERE, "gbfs_path.png"), dpi=110)
    plt.close(fig)

    sw = StagewiseClassifier(n_features_to_select=8, device="cpu").fit(X_train, y_train)
    fig, axes = plt.subplots(2, 1, figsize=(6, 6), constrained_layout=True)
    plot_stagewise(sw, ax=axes)
    fig.savefig(os.path.join(HERE, "stagewise.png"), dpi=110)
    plt.close(fig)
    for p in points:
        print(f"mu={p.mu:<5g} features={p.n_selected:2d} validation accuracy={p.val_score:.3f}")


if __name__ == "__main__":
    main()
