"""Child process of the model-file fuzz test: loads model files and predicts with them.

Run as ``python _model_fuzz_worker.py MEMORY_LIMIT_BYTES``. Reads one JSON command per line on
stdin and answers one JSON line on stdout, so one process serves many mutants (importing gpufs
and warming numba's kernels costs seconds; a load + predict costs milliseconds). The supervisor
(``test_model_fuzz.Supervisor``) sees what this process cannot report itself: a signal, a
hang, an exit.

Command: ``{"path": file, "estimator": class name, "n_features": int, "nan": bool}``: load the
file with ``<estimator>.load_model`` and predict on a fixed X (50 rows, NaN sprinkled in when
``nan``). Answer: ``{"outcome": ..., "detail": ...}`` with outcome one of

* ``"rejected"``: ``load_model`` raised ValueError (acceptable);
* ``"ok"``: loaded, and every prediction method returned finite numbers of the right shape
  (acceptable);
* ``"load_error"``, ``"predict_error"``, ``"memory"``, ``"bad_output"``, ``"bad_params"`` (the
  loaded parameters fail ``_validate_params`` or do not describe the model): failures.

``{"warmup": true}`` imports gpufs (the supervisor sends it with a longer timeout). Test hooks
that prove the supervisor can fail, and need no gpufs: ``{"selftest": "abort" | "hang" | "alloc" |
"segfault"}``.
"""

import json
import os
import resource
import sys
import traceback

import numpy as np


def _set_memory_limit(limit):
    # Address space, so an allocation the size of the declared (not the real) model fails
    # here with MemoryError instead of swapping the machine.
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _X(n_features, nan):
    rng = np.random.RandomState(12345)
    X = rng.randn(50, n_features) * 3.0
    X[:, 0] = np.round(X[:, 0])  # category values of the categorical families' column 0
    if nan:
        X[rng.rand(*X.shape) < 0.15] = np.nan
    return X


def _check_outputs(est, X):
    """Every prediction method must return finite numbers of the right shape."""
    n = X.shape[0]
    # multitask models predict each row for its task: rows go to the tasks in turn
    kw = {"task": np.resize(est.tasks_, n)} if hasattr(est, "tasks_") else {}
    out = est.predict(X, **kw)
    if np.shape(out) != (n,):
        return f"predict shape {np.shape(out)}"
    if np.asarray(out).dtype.kind == "f" and not np.isfinite(out).all():
        return "predict not finite"
    if hasattr(est, "predict_proba"):
        p = np.asarray(est.predict_proba(X, **kw))
        if p.shape != (n, len(est.classes_)) or not np.isfinite(p).all():
            return f"predict_proba shape {p.shape} or not finite"
    if hasattr(est, "decision_function"):
        d = np.asarray(est.decision_function(X, **kw))
        if d.shape[0] != n or not np.isfinite(d).all():
            return f"decision_function shape {d.shape} or not finite"
    t = np.asarray(est.transform(X))
    if t.shape != (n, int(np.count_nonzero(est.get_support()))):
        return f"transform shape {t.shape}"
    return None


def _run(cmd, classes):
    if "selftest" in cmd:
        what = cmd["selftest"]
        if what == "abort":
            os.abort()
        if what == "segfault":
            import ctypes

            ctypes.string_at(0)
        if what == "hang":
            while True:
                pass
        if what == "alloc":
            try:
                np.ones(1 << 40, dtype=np.uint8)
            except MemoryError:
                return {"outcome": "memory", "detail": "MemoryError"}
        return {"outcome": "ok", "detail": ""}
    cls = classes[cmd["estimator"]]
    try:
        est = cls.load_model(cmd["path"])
    except ValueError as exc:
        return {"outcome": "rejected", "detail": str(exc)[:300]}
    except MemoryError:
        return {"outcome": "memory", "detail": "MemoryError in load_model"}
    except BaseException as exc:  # noqa: BLE001 - every other exception is the finding
        return {
            "outcome": "load_error",
            "detail": f"{type(exc).__name__}: {exc}"[:300] + "\n" + traceback.format_exc()[-1500:],
        }
    try:  # a loaded model's parameters pass fit's checks and describe it (it saves again)
        from gpufs.io import model_io

        est._validate_params()
        model_io.to_document(est)
    except BaseException as exc:  # noqa: BLE001
        return {"outcome": "bad_params", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    X = _X(cmd["n_features"], cmd["nan"])
    try:
        bad = _check_outputs(est, X)
    except MemoryError:
        return {"outcome": "memory", "detail": "MemoryError in predict"}
    except BaseException as exc:  # noqa: BLE001
        return {
            "outcome": "predict_error",
            "detail": f"{type(exc).__name__}: {exc}"[:300] + "\n" + traceback.format_exc()[-1500:],
        }
    if bad is not None:
        return {"outcome": "bad_output", "detail": bad}
    return {"outcome": "ok", "detail": ""}


def _classes():
    import gpufs

    return {name: getattr(gpufs, name) for name in gpufs.__all__ if name[0].isupper()}


def main():
    _set_memory_limit(int(sys.argv[1]))
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not break the protocol
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    classes = None  # gpufs is imported by the first case that needs it
    for line in sys.stdin:
        cmd = json.loads(line)
        if classes is None and "selftest" not in cmd:
            classes = _classes()
        reply = {"outcome": "ok", "detail": ""} if "warmup" in cmd else _run(cmd, classes)
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
