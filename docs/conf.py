"""Sphinx configuration of the gpufs documentation (``sphinx-build -W -b html docs out``).

The API pages are generated from the docstrings (autodoc + numpydoc); the version comes from
the installed package's metadata, like everything else in gpufs. The build needs only the
``docs`` extra (``python -m pip install ".[docs]"``): Dask is mocked for the ``gpufs.dask``
page. It runs offline and in CI, nitpicky (every cross-reference must resolve). The pages load
MathJax from a CDN to typeset formulas: read offline, formulas show as their TeX source
(``sphinx.ext.imgmath`` would render images, but needs LaTeX and dvipng).
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import gpufs  # noqa: E402

project = "gpufs"
author = "the gpufs authors"
copyright = "the gpufs authors"  # noqa: A001 (Sphinx's name for it)
release = gpufs.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
]
exclude_patterns = ["_build"]
templates_path = []
html_theme = "alabaster"
html_static_path = ["_static"]
html_theme_options = {
    "description": "feature selection with boosted and bagged trees",
    "fixed_sidebar": True,
}

autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"
# the docs extra has no Dask: gpufs.dask's classes document the same with it mocked
autodoc_mock_imports = ["dask", "distributed"]
# numpydoc: list only the members the API page names, without generated stub pages
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
nitpicky = True
