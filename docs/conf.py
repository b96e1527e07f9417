"""Sphinx configuration of elegantpod's documentation site (``make docs``).

Why Sphinx with pydata-sphinx-theme and MyST-NB: the PyData projects our users already
read (Dask, pandas, NumPy, xarray) use this stack, so the site looks and navigates as
theirs do; Sphinx's autodoc with napoleon reads our numpydoc docstrings as they are;
MyST lets the guides stay Markdown (they began as the README's sections); MyST-NB
renders the tutorials as pages with their outputs, executing them at build time.

The build is offline: nothing is fetched (no intersphinx inventories, no remote images)
and the theme's assets ship in its wheel. ``tests/test_docs.py`` builds the site with
warnings as errors, checks every internal link and opens pages in headless Chromium.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import elegantpod  # noqa: E402

project = "elegantpod"
author = "elegantpod developers"
copyright = "2026, elegantpod developers"
release = version = elegantpod.__version__

extensions = [
    "myst_nb",  # Markdown pages (MyST) and notebooks, executed
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",  # the API index's tables by task (no stub pages)
    "sphinx.ext.napoleon",  # numpydoc sections
    "cli_reference",  # the command line's reference, from its argument parser
]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "jupyter_execute"]

# -- MyST -------------------------------------------------------------------------------
autosummary_generate = False  # the tables link to the module pages' own entries
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4  # "#scaling-out" links, as GitHub makes them for the README

# -- Notebooks --------------------------------------------------------------------------
# The tutorials run at the test suite's small budget (seconds each; `make tutorials`
# runs them at the full budget). "cache" keeps outputs between builds in _build/.jupyter_cache
# so a rebuild re-executes only a changed notebook; a cell error fails the build.
nb_execution_mode = os.environ.get("ELEGANTPOD_DOCS_EXECUTE", "cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# The site loads nothing from a CDN: a live widget's view needs its kernel anyway, so a
# page shows the widget's text form instead of fetching require.js and the widget manager.
nb_ipywidgets_js: dict = {}
# Notebooks a caller runs elsewhere (the test suite runs tutorial 03 in a real JupyterLab):
# comma-separated glob patterns, none by default, so `make docs` executes every notebook.
nb_execution_excludepatterns = [
    p for p in os.environ.get("ELEGANTPOD_DOCS_SKIP_EXECUTION", "").split(",") if p
]
os.environ.setdefault("ELEGANTPOD_SMALL_BUDGET", "1")

# -- API reference ----------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

# -- HTML -------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "elegantpod"
html_static_path: list[str] = []
html_copy_source = False  # the pages, not their Markdown again
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": []}
html_show_sourcelink = False


def _copy_notebooks() -> None:
    """Copy the notebooks into ``tutorials/`` of the source folder, where MyST-NB renders
    them (a symlink would not do: Sphinx resolves it and the notebook's relative links
    with it, to a path outside the site). The copies are not committed
    (``docs/.gitignore``); each is replaced atomically and only when it changed, so two
    builds at once never see half a file."""
    repo = HERE.parent
    notebooks = [*(repo / "tutorials").glob("*.ipynb"), *(repo / "notebooks").glob("*.ipynb")]
    for source in sorted(notebooks):
        target = HERE / "tutorials" / source.name
        data = source.read_bytes()
        if target.exists() and target.read_bytes() == data:
            continue
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)


_copy_notebooks()
