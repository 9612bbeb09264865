"""The input door and what the estimators read from their data: ``_input`` (X and
y from numpy, pandas, cupy, cudf, polars, pyarrow), ``_identifiers`` (refusing
identifier-like text columns), ``_category_codes`` (category -> code maps),
``_scales`` (target and weight scales), ``_colstats`` (weighted column
statistics in row chunks), ``_warm_key`` (warm_start's fingerprint of the
training data).
"""
