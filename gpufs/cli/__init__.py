"""The ``gpufs`` command line (also ``python -m gpufs``).

Owns three commands and the rules they all follow (never destroy data, one error line, ...):

  gpufs demo      GBFS on scikit-learn's breast-cancer data (it ships with scikit-learn): the
                  selected features in order of selection and the test accuracy.
  gpufs select    one of the selectors (GBFS, ControlBurn, forward stagewise) on a CSV, TSV or
                  Parquet table: prints the selected columns in order, optionally writes them
                  (with the target) to a new table, a JSON report and the model.
  gpufs explain   prints the selection record of a saved model.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

from ._interrupt import SignalsAsInterrupts, describe, quiet_start

with quiet_start():  # Ctrl-C while the command starts: one line, not a traceback
    import argparse
    import os
    import shlex
    import sys
    import time
    import warnings

    import numpy as np

    from .._version import __version__
    from ._cli_files import (
        _USER_ERRORS,
        UserError,
        _one_line,
        _probe_outputs,
        _write_table,
        atomic_output,
        check_outputs,
        printable,
        read_table,
        table_format,
        write_json,
    )

#: what ``--method`` names, and the penalty each reports (GBFS's mu, ControlBurn's lambda)
METHODS = ("gbfs", "controlburn", "stagewise")

__all__ = [
    "METHODS",
    "UserError",
    "atomic_output",
    "check_outputs",
    "load_model",
    "main",
    "printable",
    "read_table",
    "table_format",
    "write_json",
]


# --- demo -----------------------------------------------------------------------------------
def _demo(args) -> int:
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from .. import GBFSClassifier
    from ._compile_watch import CompileWatch

    _check_device(args.device)
    data = load_breast_cancer()  # numpy arrays: the demo needs nothing beyond the core install
    X, y, names = data.data, data.target, np.asarray(data.feature_names)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    print(f"breast cancer: {X.shape[0]} rows, {X.shape[1]} features; device={args.device}")
    sys.stdout.flush()  # before a compile notice on stderr
    with CompileWatch() as compiling:
        t0 = time.perf_counter()
        model = GBFSClassifier(
            mu=args.mu,
            n_estimators=args.trees,
            max_depth=args.depth,
            device=args.device,
            random_state=0,
            verbose=_progress(args),
        )
        model.fit(X_tr, y_tr)
        fit_compile = compiling.seconds
        secs = time.perf_counter() - t0 - fit_compile
        accuracy = model.score(X_te, y_te)
    sel = model.selected_features_
    print(f"selected {len(sel)} of {X.shape[1]} features (mu={args.mu}), in order of selection:")
    for rank, f in enumerate(sel, 1):
        print(f"  {rank:2d}. {names[f]}  (first used by tree {model.first_use_tree_[f]})")
    print(
        f"test accuracy: {accuracy:.4f}  (fit {secs:.2f} s on {model.device_}"
        + _compiled_note(compiling)
        + ")"
    )
    return 0


def _compiled_note(compiling) -> str:
    """``; compiling the kernels took 41.2 s, once`` after a cold cache (a ``CompileWatch``
    that gave its notice), else nothing."""
    return (
        f"; compiling the kernels took {compiling.seconds:.1f} s, once" if compiling.noticed else ""
    )


def _check_device(device: str) -> None:
    """An unusable ``--device gpu`` is a user error, found before any work."""
    from .._device import resolve_device

    try:
        resolve_device(device)
    except RuntimeError as exc:  # said in the command's words: --device cpu, not device='cpu'
        raise UserError(_cli_spelling(str(exc))) from exc


def _cli_spelling(text: str) -> str:
    """The library's ``device='cpu'`` advice as the option a command-line user passes."""
    import re

    return re.sub(r"device='(\w+)'", r"--device \1", text)


def _progress(args) -> bool:
    """A progress bar only on a terminal: never in logs, pipes or CI."""
    return (not args.no_progress) and sys.stdout.isatty() and sys.stderr.isatty()


# --- select ---------------------------------------------------------------------------------
def _task(y, task: str) -> str:
    """classification or regression: strings, booleans and categories are labels; numbers are
    labels when scikit-learn sees discrete classes and there are at most 20 of them."""
    if task != "auto":
        return task
    from sklearn.utils.multiclass import type_of_target

    if y.dtype.kind in "ObUS" or str(y.dtype) in ("category", "string", "str"):
        return "classification"
    with warnings.catch_warnings():  # casts of values near 1e308: noise, the fit says more
        warnings.simplefilter("ignore", RuntimeWarning)
        kind = type_of_target(y.to_numpy())
    return (
        "classification" if kind in ("binary", "multiclass") and y.nunique() <= 20 else "regression"
    )


def _estimator(args, task: str):
    from .. import (
        ControlBurnClassifier,
        ControlBurnRegressor,
        GBFSClassifier,
        GBFSRegressor,
        StagewiseClassifier,
        StagewiseRegressor,
    )

    classification = task == "classification"
    # the columns _select resolved (--categorical and the other text columns), else by dtype
    categorical = getattr(args, "categorical_columns", None) or "from_dtype"
    common = dict(
        n_features_to_select=args.k,
        device=args.device,
        random_state=args.random_state,
        verbose=_progress(args),
        categorical_features=categorical,
    )
    if args.method == "gbfs":
        cls = GBFSClassifier if classification else GBFSRegressor
        return cls(
            mu=0.05 if args.mu is None else args.mu,
            n_estimators=100 if args.trees is None else args.trees,
            max_depth=4 if args.depth is None else args.depth,
            **common,
        )
    if args.method == "controlburn":
        cls = ControlBurnClassifier if classification else ControlBurnRegressor
        return cls(alpha=args.alpha, **common)
    cls = StagewiseClassifier if classification else StagewiseRegressor
    return cls(**common)


def _check_method_options(args) -> None:
    only = {
        "--mu": ("mu", "gbfs"),
        "--trees": ("trees", "gbfs"),
        "--depth": ("depth", "gbfs"),
        "--alpha": ("alpha", "controlburn"),
    }
    for flag, (dest, method) in only.items():
        if getattr(args, dest) is not None and args.method != method:
            raise UserError(f"{flag} applies to --method {method} only (not {args.method})")
    if args.alpha is not None and args.k is not None:
        raise UserError(
            "give either -k (select exactly k features) or --alpha (the lasso's lambda), not both"
        )


def _drop_list(values) -> list:
    """--drop a --drop b,c -> [a, b, c]."""
    return [name.strip() for value in values or () for name in value.split(",") if name.strip()]


def _jsonable(value):
    """Plain JSON values for a report: numpy scalars and arrays to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


def _feature_scores(est, method: str):
    """(score per feature, what the score means) for the report and the printout."""
    if method == "stagewise":
        return est._feature_scores(), (
            "|weight| on the standardized feature (a categorical "
            "column: the RMS spread of its category weights), "
            "summed over classes"
        )
    meaning = (
        "share of the ensemble's total split gain"
        if method == "gbfs"
        else "share of the forest's lasso-weighted importance"
    )
    return np.asarray(est.feature_importances_, dtype=np.float64), meaning


def _selected_names(est):
    names = getattr(est, "feature_names_in_", None)
    if names is None:
        names = [f"x{i}" for i in range(est.n_features_in_)]
    return [str(names[f]) for f in est.selected_features_]


def _select(args) -> int:
    t_start = time.perf_counter()
    _check_method_options(args)
    outputs = {"--output": args.output, "--report": args.report, "--save-model": args.save_model}
    if args.output is not None:
        table_format(args.output)
    check_outputs(outputs, [args.table], args.force)
    _probe_outputs(outputs)
    _check_device(args.device)  # an unusable --device gpu fails now, not after the read

    df = read_table(args.table)
    t_read = time.perf_counter()
    if len(df) == 0:  # its columns would all read as text
        raise UserError(f"{args.table} has a header but no rows")
    if args.target not in df.columns:
        raise UserError(
            f"target column {args.target!r} is not in {args.table} (columns: "
            f"{_short_list(df.columns)})"
        )
    drop = _drop_list(args.drop)
    missing = [c for c in drop if c not in df.columns]
    if missing:
        raise UserError(f"--drop: no column {_short_list(missing)} in {args.table}")
    if args.target in drop:
        raise UserError(f"--drop names the target column {args.target!r}")
    y = df[args.target]
    X = df.drop(columns=[args.target, *drop])
    if X.shape[1] == 0:
        raise UserError(f"{args.table} has no feature columns left besides the target")
    named = _drop_list(args.categorical)
    unknown = [c for c in named if c not in X.columns]
    if unknown:
        raise UserError(f"--categorical: no feature column {_short_list(unknown)} in {args.table}")
    # numbers, booleans, and text or categorical columns (categorical features) are read
    text = [
        c
        for c in X.columns
        if X[c].dtype.kind in "OSU" or str(X[c].dtype) in ("category", "string", "str")
    ]
    other = [
        c for c in X.columns if X[c].dtype.kind not in "biuf" and c not in text and c not in named
    ]
    if other:
        raise UserError(
            f"feature columns must be numeric, text or categorical; not: "
            f"{_short_list(other)} (leave them out with --drop)"
        )
    notes = []
    # --categorical adds to the text columns (categorical by their type): those not named
    # are judged as without it
    left_out = _identifier_columns(X, [c for c in text if c not in named])
    for column, evidence in left_out:  # said now, before the long fit
        notes.append(
            f"left out the text column {evidence}: it looks like an identifier, not "
            "a feature (most rows have a value of their own); pass --drop "
            f"{shlex.quote(column)} to leave it out without this warning, or name "
            "it in --categorical to use it"
        )
        sys.stderr.write(f"warning: {printable(notes[-1])}\n")
    X = X.drop(columns=[column for column, _ in left_out])
    if X.shape[1] == 0:
        raise UserError(f"{args.table} has no feature columns left besides the target")
    if y.isna().any():
        raise UserError(
            f"target column {args.target!r} has {int(y.isna().sum())} missing "
            "values; remove those rows first"
        )
    task = _task(y, args.task)

    gone = {column for column, _ in left_out}
    args.categorical_columns = (
        named + [c for c in text if c not in named and c not in gone] if named else None
    )
    est = _estimator(args, task)
    if args.save_model is not None and not hasattr(est, "save_model"):
        raise UserError(f"{type(est).__name__} cannot be saved as JSON yet; leave out --save-model")
    from ._compile_watch import CompileWatch

    sys.stdout.flush()
    with warnings.catch_warnings(record=True) as caught, CompileWatch() as compiling:
        warnings.simplefilter("always")
        est.fit(X, y)
    t_fit = time.perf_counter()
    n_early = len(notes)
    notes += list(dict.fromkeys(_one_line(w.message) for w in caught))
    if len(est.selected_features_) == 0:  # the fit's advice, in the command's own words
        knob = {"gbfs": ", or a smaller --mu", "controlburn": ", or a smaller --alpha"}
        notes.append(
            "no column was selected: pass -k N to select exactly N columns"
            + knob.get(args.method, "")
        )
    for note in notes[n_early:]:  # one line each, like the errors, not Python's warning format
        sys.stderr.write(f"warning: {printable(note)}\n")

    names = _selected_names(est)
    scores, meaning = _feature_scores(est, args.method)
    sel = [int(f) for f in est.selected_features_]
    penalty = {
        "gbfs": ("mu", getattr(est, "mu_", None)),  # the mu the final fit ran at
        "controlburn": ("lambda", getattr(est, "lambda_", None)),
        "stagewise": (None, None),
    }[args.method]
    header = f"{task}, {args.method}: selected {len(sel)} of {X.shape[1]} columns"
    if penalty[0] is not None and penalty[1] is not None:
        header += f" ({penalty[0]}={penalty[1]:.6g})"
    order = "most important first" if args.method == "controlburn" else "in order of selection"
    print(f"{header}, {order}:")
    for rank, (f, name) in enumerate(zip(sel, names), 1):
        print(f"  {rank:3d}. {printable(name)}  (score {scores[f]:.4f})")
    print(f"score: {meaning}")
    if compiling.noticed:
        print(f"fit {t_fit - t_read - compiling.seconds:.2f} s" + _compiled_note(compiling))

    if args.output is not None:
        out = X[names].copy()
        out[args.target] = y
        with atomic_output(args.output, args.force) as fh:
            _write_table(out, args.output, fh)
        print(f"wrote {len(names)} selected columns and {args.target!r} to {args.output}")
    if args.save_model is not None:
        _save_model(est, args.save_model, args.force)
        print(f"wrote the model to {args.save_model}")
    t_write = time.perf_counter()

    if args.report is not None:
        train_metric = "accuracy" if task == "classification" else "r2"
        report = {
            "gpufs_version": __version__,
            "command": ["gpufs", *args.argv],
            "input": {
                "path": os.path.abspath(args.table),
                "rows": int(df.shape[0]),
                "columns": int(df.shape[1]),
                "target": args.target,
                "dropped": drop,
                "left_out": [column for column, _ in left_out],
            },
            "task": task,
            "method": args.method,
            "estimator": type(est).__name__,
            "params": _jsonable(est.get_params()),
            "device": est.device_,
            "penalty": None
            if penalty[0] is None
            else {"name": penalty[0], "value": _jsonable(penalty[1])},
            "n_features_in": int(X.shape[1]),
            "selected": [
                {"rank": r, "name": n, "index": f, "score": _jsonable(scores[f])}
                for r, (f, n) in enumerate(zip(sel, names), 1)
            ],
            "first_use_tree": (
                None
                if getattr(est, "first_use_tree_", None) is None
                else [int(est.first_use_tree_[f]) for f in sel]
            ),
            "score_meaning": meaning,
            "train_score": {"metric": train_metric, "value": _jsonable(est.score(X, y))},
            "warnings": notes,
            "timings_s": {
                "read": t_read - t_start,
                "compile": compiling.seconds,
                "fit": t_fit - t_read - compiling.seconds,
                "write": t_write - t_fit,
            },
            "outputs": {"table": args.output, "model": args.save_model},
        }
        if getattr(est, "fit_times_", None):
            report["timings_s"]["fit_phases"] = _jsonable(est.fit_times_)
        report["timings_s"]["total"] = time.perf_counter() - t_start
        write_json(_jsonable(report), args.report, args.force)
        print(f"wrote the report to {args.report}")
    return 0


def _save_model(est, path: str, force: bool) -> None:
    """The model file (``est.save_model``'s text) written through ``atomic_output`` like
    every output."""
    from ..io.model_io import dumps, to_document

    text = dumps(to_document(est))
    with atomic_output(path, force) as fh:
        fh.write(text.encode("utf-8"))


def _identifier_columns(X, text) -> list:
    """[(column, evidence)] of the ``text`` columns of X that ``gpufs.data._identifiers`` calls
    identifier-like."""
    from ..data._identifiers import describe, identifier_like

    found = []
    for c in text:
        n_present, n_distinct = int(X[c].notna().sum()), int(X[c].nunique(dropna=True))
        if identifier_like(n_distinct, n_present):
            found.append((c, describe(c, n_distinct, n_present)))
    return found


def _short_list(items, limit=10) -> str:
    items = [str(i) for i in items]
    shown = ", ".join(repr(i) for i in items[:limit])
    return shown + (f", ... ({len(items)} in all)" if len(items) > limit else "")


# --- explain --------------------------------------------------------------------------------
def load_model(path: str):
    """A fitted gpufs estimator from a model file, through the validated loader
    (``gpufs.io.model_io.load_model``: every field is checked before any array is used)."""
    from ..io.model_io import load_model as load_validated

    if not os.path.exists(path):
        raise UserError(f"no such file: {path}")
    try:
        return load_validated(path)
    except ValueError as exc:  # ModelFileError: the message names the field, not the file
        text = _one_line(exc)
        text = text[len("the file: ") :] if text.startswith("the file: ") else text
        hint = (
            "; gpufs explain reads the model file that --save-model or save_model() "
            "wrote, not a --report file"
            if "not a gpufs model file" in text
            else ""
        )
        raise UserError(f"{path}: {text.rstrip('.')}{hint}") from exc


def _explain(args) -> int:
    est = load_model(args.model)
    names = _selected_names(est)
    print(
        f"{printable(args.model)}: {type(est).__name__}, {est.n_features_in_} features in, "
        f"{len(names)} selected"
    )
    params = est.get_params()
    for key in (
        "mu",
        "penalty_scaling",
        "n_features_to_select",
        "n_estimators",
        "max_depth",
        "learning_rate",
        "alpha",
    ):
        if key in params:
            print(f"  {key} = {params[key]}")
    mu_used = getattr(est, "mu_", None)
    if mu_used is not None:
        print(f"  mu_ = {mu_used:.6g}  (the mu the final fit ran at)")
    lam = getattr(est, "lambda_", None)
    if lam is not None:
        print(f"  lambda = {lam:.6g}")
    first = getattr(est, "first_use_tree_", None)
    print("selected features, in order of selection:")
    for rank, (f, name) in enumerate(zip(est.selected_features_, names), 1):
        where = f"  (first used by tree {first[f]})" if first is not None else ""
        print(f"  {rank:3d}. {printable(name)}{where}")
    costs = getattr(est, "cost_history_", None)
    if costs is not None:  # stagewise: the cost after each round
        print("cost after each round (round 0: the bias alone):")
        for r, c in enumerate(costs):
            entered = f"  +{printable(names[r - 1])}" if 0 < r <= len(names) else ""
            print(f"  {r:5d}  {c:.6f}{entered}")
    record = getattr(est, "selection_record_", None)
    if record:
        n_trees = len(record["train_loss"])
        val = np.asarray(record.get("val_loss", [np.nan] * n_trees), dtype=np.float64)
        print(f"selection record ({n_trees} trees; trees that added features):")
        print("   tree  train loss    val loss  features added")
        names_in = getattr(est, "feature_names_in_", None)
        for t in range(n_trees):
            added = list(record["features_added"][t])
            if not added:
                continue
            added_names = [
                printable(names_in[f]) if names_in is not None else f"x{f}" for f in added
            ]
            v = "-" if np.isnan(val[t]) else f"{val[t]:.6f}"
            print(f"  {t:5d}  {record['train_loss'][t]:10.6f}  {v:>10}  {', '.join(added_names)}")
        print(
            f"  final  {record['train_loss'][-1]:10.6f}  "
            f"{'-' if np.isnan(val[-1]) else f'{val[-1]:.6f}':>10}"
        )
    return 0


def _show_warning_in_one_line(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` while a command runs: one ``warning:`` line, like the errors
    (the fit's own warnings are collected and printed by ``_select``)."""
    sys.stderr.write(f"warning: {_one_line(message)}\n")


# --- the parser -----------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one ``error:`` line (status 2)."""

    def error(self, message):
        sys.stderr.write(f"error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of an error",
    )
    ap = _Parser(
        prog="gpufs",
        description="Feature selection with boosted and bagged trees, "
        "on NVIDIA GPUs and on the CPU.",
    )
    ap.add_argument("--version", action="version", version=f"gpufs {__version__}")
    ap.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def device_and_progress(p):
        p.add_argument(
            "--device",
            default="auto",
            choices=["auto", "cpu", "gpu"],
            help="where to fit (auto: the GPU when cupy sees one)",
        )
        p.add_argument(
            "--no-progress", action="store_true", help="no progress bar even on a terminal"
        )

    demo = sub.add_parser("demo", parents=[shared], help="GBFS on the breast-cancer data set")
    demo.add_argument("--mu", type=float, default=0.1, help="price of a feature's first use")
    demo.add_argument("--trees", type=_positive_int, default=100)
    demo.add_argument("--depth", type=_positive_int, default=4)
    device_and_progress(demo)

    sel = sub.add_parser(
        "select",
        parents=[shared],
        help="select features from a CSV, TSV or Parquet table",
        description="Select features from a table and write the selected columns, a report "
        "and the model. Never writes over the input or an existing file (unless "
        "--force).",
    )
    sel.add_argument("table", help="input table: .csv, .tsv (optionally compressed) or .parquet")
    sel.add_argument("--target", required=True, help="the column to predict")
    sel.add_argument("-k", type=_positive_int, default=None, help="number of features to select")
    sel.add_argument(
        "--method",
        choices=METHODS,
        default="gbfs",
        help="gbfs (boosted trees, default), controlburn (sparse forest) or stagewise (linear)",
    )
    sel.add_argument("--task", default="auto", choices=["auto", "classification", "regression"])
    sel.add_argument(
        "--drop",
        action="append",
        metavar="COLUMNS",
        help="columns to leave out (repeat, or separate with commas)",
    )
    sel.add_argument(
        "--categorical",
        action="append",
        metavar="COLUMNS",
        help="columns to treat as categorical (repeat, or separate with commas); "
        "default: the text and categorical columns",
    )
    sel.add_argument(
        "--output",
        help="write the selected columns and the target here (format from the extension)",
    )
    sel.add_argument("--report", help="write a JSON report here")
    sel.add_argument("--save-model", help="write the fitted model as JSON here")
    sel.add_argument("--force", action="store_true", help="replace existing output files")
    sel.add_argument("--random-state", type=int, default=0)
    sel.add_argument(
        "--mu", type=float, default=None, help="gbfs: price of a feature's first use (default 0.05)"
    )
    sel.add_argument(
        "--trees", type=_positive_int, default=None, help="gbfs: boosting rounds (default 100)"
    )
    sel.add_argument(
        "--depth", type=_positive_int, default=None, help="gbfs: tree depth (default 4)"
    )
    sel.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="controlburn: solve the lasso at this lambda instead of bisecting to k features",
    )
    device_and_progress(sel)

    exp = sub.add_parser(
        "explain", parents=[shared], help="print the selection record of a saved model"
    )
    exp.add_argument("model", help="a model file written by --save-model or save_model()")
    return ap


def main(argv=None) -> int:
    """Run the ``gpufs`` command line.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 on success, 2 for a user error, 130 when interrupted (Ctrl-C), 143 when
        terminated (SIGTERM), 1 for an internal error.

    Examples
    --------
    A user error prints one ``error: ...`` line on stderr and returns 2:

    >>> main(["select", "no-such-table.csv", "--target", "label"])
    2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    with SignalsAsInterrupts() as signals:  # SIGINT and SIGTERM: clean up, one line
        args = _build_parser().parse_args(argv)
        args.argv = argv
        run = {"demo": _demo, "select": _select, "explain": _explain}[args.command]
        try:
            with warnings.catch_warnings():  # restores Python's warning printer afterwards
                warnings.showwarning = _show_warning_in_one_line
                status = run(args)
            if signals.signum is not None:  # held back (numba was compiling) to the end
                return _interrupted(signals.signum)
            return status
        except Exception as exc:
            if args.debug:
                raise
            if signals.signum is not None:  # numba turns an interrupt into a SystemError
                return _interrupted(signals.signum)
            if isinstance(exc, _USER_ERRORS):
                sys.stderr.write(f"error: {_one_line(exc)}\n")
                return 2
            sys.stderr.write(
                f"error: internal error ({type(exc).__name__}: "
                f"{_one_line(exc)}); rerun with --debug for the traceback and "
                "report it\n"
            )
            return 1
        except KeyboardInterrupt:
            if args.debug:
                raise
            return _interrupted(signals.signum)


def _interrupted(signum) -> int:
    """One line for an interrupt, and its status: 130 for Ctrl-C, 143 for SIGTERM."""
    message, status = describe(signum)
    sys.stderr.write(f"error: {message}\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
