"""The public API documents itself (every module, public class, function and method has
a docstring, and ``help()`` on the main entry points reads well), and the docs site builds
as ``make docs`` builds it: warnings as errors, every notebook executed, every internal
link resolved, pages that open offline in headless Chromium."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import pydoc
import subprocess
import sys
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote, urlsplit

import nbformat
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


SITE_SOURCE = Path(__file__).resolve().parents[1] / "docs"
NOT_EXECUTED_HERE = ("03_tournament", "tournament_dashboard", "trading_dashboard")
"""The notebooks this build renders without running, because another test runs them
whole: tutorial 03 in a user's JupyterLab (tests/test_jupyterhub.py), the two dashboards
with nbclient (tests/test_notebooks.py, which checks all three). Why: one test must end
well inside its 300 s limit on a loaded 2-core box, and the dashboards are a third of
the notebooks' time (the build took 156-172 s with them, in clean-clone runs)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """``make docs``, as a user runs it: the whole site, warnings as errors, the tutorials
    executed at the small budget (the suite's one run of each, but those of
    :data:`NOT_EXECUTED_HERE`), into a temporary folder. Returns the output folder,
    what sphinx-build printed, and the private temporary folder the build and its
    kernels had."""
    base = tmp_path_factory.mktemp("site")
    private_tmp = base / "tmp"
    private_tmp.mkdir()
    env = dict(
        os.environ,
        ELEGANTPOD_DOCS_EXECUTE="force",  # no cache: every notebook runs, here, now
        ELEGANTPOD_SMALL_BUDGET="1",
        ELEGANTPOD_WORKDIR=str(base / "workdir"),
        TMPDIR=str(private_tmp),
        ELEGANTPOD_DOCS_SKIP_EXECUTION=",".join(f"*{n}*" for n in NOT_EXECUTED_HERE),
    )
    command = [
        sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
        "-d", str(base / "doctrees"),
        str(SITE_SOURCE), str(base / "html"),
    ]  # fmt: skip
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
    )
    return SimpleNamespace(html=base / "html", done=done, tmp=private_tmp)


def test_the_site_builds_with_warnings_as_errors(site):
    printed = [
        line
        for line in (site.done.stdout + site.done.stderr).splitlines()
        if "WARNING" in line
        and "IPKernelApp" not in line  # the kernels' own notices
        or "ERROR" in line
    ]
    assert site.done.returncode == 0 and not printed, "\n".join(printed) or site.done.stderr[-4000:]
    # it wrote under elegantpod.workdir(), never into fresh temporary folders
    assert not [p.name for p in site.tmp.glob("elegantpod*")]


def _notebook_pages():
    return sorted((SITE_SOURCE.parent / "tutorials").glob("*.ipynb")) + sorted(
        (SITE_SOURCE.parent / "notebooks").glob("*.ipynb")
    )


@pytest.mark.parametrize("notebook", _notebook_pages(), ids=lambda p: p.stem)
def test_every_notebook_is_a_page_with_its_outputs_and_no_error(site, notebook):
    """The tutorials render with their outputs (MyST-NB executed them at the small
    budget); a cell that raised would have failed the build, and no traceback shows."""
    html = (site.html / "tutorials" / f"{notebook.stem}.html").read_text(encoding="utf-8")
    code_cells = sum(
        1 for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"
    )
    assert html.count('class="cell docutils container"') == code_cells
    if notebook.stem not in NOT_EXECUTED_HERE:
        assert html.count("cell_output") >= 2, f"{notebook.name} shows no outputs"
    assert "Traceback (most recent call last)" not in html


class _Links(HTMLParser):
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


def test_every_internal_link_and_anchor_resolves(site):
    """A renamed page, a moved section or a stale cross-reference fails here; links that
    leave the site are not followed (the build is offline), but none is a file path
    outside it."""
    parsed = {}
    for page in site.html.rglob("*.html"):
        if "_static" in page.relative_to(site.html).parts:
            continue  # the theme's template partials, not pages
        p = _Links()
        p.feed(page.read_text(encoding="utf-8"))
        parsed[page.resolve()] = p
    assert len(parsed) > 30
    broken = []
    for page, p in parsed.items():
        for link in p.links:
            parts = urlsplit(link)
            if parts.scheme in ("http", "https", "mailto") or link.startswith("data:"):
                continue
            assert not parts.scheme and not link.startswith("//"), (page, link)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.is_relative_to(site.html.resolve()):
                broken.append(f"{page.relative_to(site.html)}: {link} (outside the site)")
            elif not target.exists():
                broken.append(f"{page.relative_to(site.html)}: {link}")
            elif (
                parts.fragment
                and target.suffix == ".html"
                and parts.fragment not in parsed[target].ids
            ):
                broken.append(f"{page.relative_to(site.html)}: {link} (no such anchor)")
    assert not broken, "\n".join(broken[:20])


def test_the_reference_pages_come_from_the_code(site):
    """The API reference documents the entry points where they live, and the command
    line's reference is the parser's own help, one section per subcommand."""
    from elegantpod.cli.args import parser

    api = (site.html / "api" / "tournament.html").read_text(encoding="utf-8")
    assert 'id="elegantpod.tournament.orchestrator.Tournament.dashboard"' in api
    pods = (site.html / "api" / "pods.html").read_text(encoding="utf-8")
    entry_points = ("training.train", "workspace.workdir", "pod.pod.Pod", "config.PodSpec")
    for name in (f"elegantpod.{e}" for e in entry_points):
        assert f'id="{name}"' in pods, name
    cli = (site.html / "guides" / "cli.html").read_text(encoding="utf-8")
    commands = next(a for a in parser()._actions if hasattr(a, "choices") and a.choices)
    for name, sub in commands.choices.items():
        assert f'id="elegantpod-{name}"' in cli, name
        for action in sub._actions:
            for flag in action.option_strings:
                assert html_escape(flag) in cli, (name, flag)


def test_the_landing_page_and_a_tutorial_open_offline_in_chromium(site, tmp_path):
    """What a reader sees: the landing page with its navigation and the dashboard's
    picture, a tutorial page with code and outputs; no request leaves the site (the
    theme's assets ship in it) and no script error."""
    from playwright.sync_api import sync_playwright

    from tests.helpers import need_chromium

    exe = need_chromium()
    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=exe, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((site.html / "index.html").as_uri())
            page.wait_for_load_state("load")
            nav = page.locator("nav").first.inner_text()
            for item in ("Getting started", "Tutorials", "User guides", "API reference"):
                assert item in page.content(), item
            assert nav
            picture = page.locator("img[src*='dashboard']").first
            assert picture.evaluate("i => i.complete && i.naturalWidth > 100")
            page.screenshot(path=str(tmp_path / "landing.png"))
            page.goto((site.html / "tutorials" / "01_quickstart.html").as_uri())
            page.wait_for_load_state("load")
            assert page.locator("div.cell_input").count() >= 5
            assert page.locator("div.cell_output").count() >= 2
            assert "Quickstart" in page.title()
            page.screenshot(path=str(tmp_path / "tutorial.png"))
        finally:
            browser.close()
    assert not errors, errors
    outside = [u for u in requests if not u.startswith("file://")]
    assert not outside, outside[:5]
