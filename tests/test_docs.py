"""The public API documents itself: every module, public class, function and method has
a docstring, and ``help()`` on the main entry points reads well."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import pydoc

import pytest

import elegantpod


def _modules():
    for info in pkgutil.walk_packages(elegantpod.__path__, "elegantpod."):
        if not info.name.endswith(".__main__"):  # ``python -m elegantpod.cli`` runs it
            yield importlib.import_module(info.name)


def _public(mod):
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    for n in names:
        obj = getattr(mod, n, None)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(
            obj, "__module__", ""
        ).startswith("elegantpod"):
            yield f"{mod.__name__}.{n}", obj


def _method_doc(cls, name):
    """A method's docstring, its own or the nearest base class's (what help() shows)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            a = vars(klass)[name]
            f = a.fget if isinstance(a, property) else getattr(a, "__func__", a)
            if getattr(f, "__doc__", None):
                return f.__doc__
    return None


def test_every_public_module_class_function_and_method_has_a_docstring():
    missing, seen = [], set()
    for mod in _modules():
        if not mod.__doc__:
            missing.append(mod.__name__)
        for name, obj in _public(mod):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if not inspect.getdoc(obj):
                missing.append(name)
            if inspect.isclass(obj):
                for attr, a in vars(obj).items():
                    f = a.fget if isinstance(a, property) else getattr(a, "__func__", a)
                    if attr.startswith("_") or not inspect.isfunction(f):
                        continue
                    if not _method_doc(obj, attr):
                        missing.append(f"{name}.{attr}")
    assert not missing, f"undocumented: {missing}"
    assert len(seen) > 80  # the scan really walked the package


@pytest.mark.parametrize(
    "obj",
    [
        elegantpod.Tournament,
        elegantpod.Pod,
        elegantpod.train,
        elegantpod.cluster,
        elegantpod.gateway_cluster,
        elegantpod.finance.backtests.backtest,
        elegantpod.agents.register_algo,
    ],
    ids=lambda o: o.__name__,
)
def test_help_reads_well(obj):
    text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
    assert obj.__name__ in text
    doc = inspect.getdoc(obj)
    assert len(doc.split()) >= 15, "a one-liner is not enough for an entry point"
    if inspect.isfunction(obj) and inspect.signature(obj).parameters:
        assert "Parameters" in doc or "Raises" in doc or "Returns" in doc


def test_api_reference_builds_and_every_link_resolves(tmp_path):
    """``make docs``: one pdoc page per module, no warning printed while building (an
    annotation pdoc cannot resolve shows up as its raw string), and no link to a page or
    anchor that does not exist (a renamed module or a stale cross-reference fails here)."""
    import importlib.util
    import sys
    import warnings
    from html.parser import HTMLParser
    from pathlib import Path
    from urllib.parse import urlsplit

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("build_api", root / "docs" / "build_api.py")
    build_api = importlib.util.module_from_spec(spec)
    sys.modules["build_api"] = build_api
    spec.loader.exec_module(build_api)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pages = build_api.build(tmp_path)
    assert len(pages) == len(build_api.module_names()) > 40
    # what `make docs` would print: Python hides these categories outside __main__
    hidden = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
    shown = [w for w in caught if not issubclass(w.category, hidden)]
    printed = [f"{w.category.__name__}: {w.message}" for w in shown]
    assert not printed, "\n".join(printed)

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.links, self.ids = [], set()

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if a.get("id"):
                self.ids.add(a["id"])
            for key in ("href", "src"):
                if a.get(key) and tag in ("a", "link", "script", "img"):
                    self.links.append(a[key])

    parsed = {}
    for page in [*tmp_path.rglob("*.html")]:
        p = Links()
        p.feed(page.read_text(encoding="utf-8"))
        parsed[page.resolve()] = p
    broken = []
    for page, p in parsed.items():
        for link in p.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//") or link.startswith("data:"):
                continue  # pdoc links nothing outside but its own pages; see below
            target = (page.parent / parts.path).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(tmp_path)}: {link}")
            elif (
                parts.fragment
                and target.suffix == ".html"
                and parts.fragment not in parsed[target].ids
            ):
                broken.append(f"{page.relative_to(tmp_path)}: {link} (no such anchor)")
    assert not broken, "\n".join(broken[:20])
    # the reference documents the entry points a user starts from
    tournament = (tmp_path / "elegantpod" / "tournament" / "orchestrator.html").read_text()
    assert 'id="Tournament.dashboard"' in tournament
    top = (tmp_path / "elegantpod.html").read_text()
    for name in ("register_env", "workdir", "train", "Tournament"):
        assert name in top
