"""Build elegantpod's HTML API reference with pdoc: ``python docs/build_api.py [OUT]``.

``make docs`` runs it with ``OUT = docs/api`` (generated, not committed); open
``docs/api/index.html``. ``tests/test_docs.py`` builds it into a temporary folder and
checks its names and links.

Why not plain ``pdoc elegantpod``: pdoc lists only the submodules a package names in
``__all__``, and our packages' ``__all__`` hold their public classes and functions (the
top-level one is lazy, PEP 562), so pdoc would document two modules of forty. This
script hands pdoc every module that ``pkgutil`` finds, and the template in
``docs/pdoc/`` lists each page's submodules from that set.

Importing every module is safe: no module starts a cluster, touches a GPU or needs an
optional dependency at import (the Isaac Gym adapter imports ``isaacgym`` only when an
env is built), so nothing is excluded.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

import pdoc.doc
import pdoc.render

TEMPLATES = Path(__file__).resolve().parent / "pdoc"
"""Our one template override: the navigation's submodule list."""


def module_names(package: str = "elegantpod") -> list[str]:
    """``package`` and every module under it, in import order (parents first); not a
    ``__main__`` (``python -m elegantpod.cli``), which runs the command when imported."""
    root = __import__(package)
    found = pkgutil.walk_packages(root.__path__, f"{package}.")
    return [package, *sorted(i.name for i in found if not i.name.endswith(".__main__"))]


def _resolve_lazy_names(module) -> None:
    """Put a module's lazy ``__all__`` names (PEP 562 ``__getattr__``) in its namespace.

    pdoc reads ``module.__dict__`` and would take an unresolved name for a missing
    submodule. A name that cannot be imported here (an optional dependency, such as
    ipywidgets for the dashboard) stays out, and pdoc warns about it.
    """
    for attr in getattr(module, "__all__", ()):
        if attr not in vars(module):
            with contextlib.suppress(AttributeError, ImportError):
                setattr(module, attr, getattr(module, attr))


def build(out: str | Path, package: str = "elegantpod") -> list[Path]:
    """Write one HTML page per module, ``index.html`` and the search index under ``out``.

    Parameters
    ----------
    out
        Output folder; created if missing, existing pages are overwritten.
    package
        The package to document.

    Returns
    -------
    list of Path
        The pages written, one per module.
    """
    out = Path(out)
    # pdoc still walks the members of a hidden alias (``Tensor = torch.Tensor``) and
    # warns about torch's internals; they are not ours to fix.
    warnings.filterwarnings("ignore", message=r"Cannot determine where .*\.Tensor\.")
    pdoc.render.configure(
        docformat="numpy",
        template_directory=TEMPLATES,
        footer_text=f"{package} API reference (make docs)",
    )
    names = module_names(package)
    for name in names:
        _resolve_lazy_names(importlib.import_module(name))
    modules = {name: pdoc.doc.Module.from_name(name) for name in names}
    pages = []
    for module in modules.values():
        page = out / f"{module.fullname.replace('.', '/')}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(pdoc.render.html_module(module, modules), encoding="utf-8")
        pages.append(page)
    (out / "index.html").write_text(pdoc.render.html_index(modules), encoding="utf-8")
    (out / "search.js").write_text(pdoc.render.search_index(modules), encoding="utf-8")
    return pages


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/api")
    written = build(target)
    print(f"{len(written)} pages in {target}/ (open {target / 'index.html'})")
