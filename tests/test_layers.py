"""Layers point one way (issue 33): no import cycle among elegantpod's modules.

There is no cap on a module's length (issue 43): a module holds one concept, whatever
its length, and a cap made modules split to meet a number.

The import graph is read from the source with ``ast``, so it counts every import: those
inside functions too (a function-level import hides a cycle from the interpreter, not
from a reader), and those under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "elegantpod"

# issue 33: being removed. Each is a cycle that exists today; a cycle found must lie
# inside one of these, so a new one (or the old agents <-> config <-> envs one) fails.
KNOWN: set[frozenset[str]] = set()  # none left


def _modules() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The module that ``name`` (a module, or a name inside one) lives in."""
    while name not in mods:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def _parse(path: Path) -> ast.Module:
    """``ast.parse`` of ``path``, tried again on CPython 3.11's "AST constructor recursion
    depth mismatch" SystemError (gh-106905: the parser's depth counter is shared by
    threads, and a Dask or IO thread left by an earlier test may be parsing too)."""
    source = path.read_text(encoding="utf-8")
    for attempt in range(5):
        try:
            return ast.parse(source)
        except SystemError:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def import_graph() -> dict[str, set[str]]:
    """Module -> the elegantpod modules it imports, anywhere in its source."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(_parse(path)):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1 packages
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                # "from pkg import sub" imports the submodule, "from mod import f" the module
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                owner = _owner(target, mods) if target.startswith("elegantpod") else None
                if owner is not None and owner != mod:
                    graph[mod].add(owner)
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of two or more modules: each holds a cycle."""
    reach = {m: _reachable(graph, m) for m in graph}
    groups = {frozenset({m} | {o for o in reach[m] if m in reach[o]}) for m in graph}
    return sorted((g for g in groups if len(g) > 1), key=sorted)


def _one_cycle(graph: dict[str, set[str]], group: frozenset[str]) -> str:
    """A shortest import path around ``group``: ``a -> b -> a``."""
    start = min(group)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for nxt in sorted(graph[path[-1]] & group):
            if nxt == start:
                return " -> ".join([*path, start])
            if nxt not in seen:
                seen.add(nxt)
                paths.append([*path, nxt])
    return ", ".join(sorted(group))


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    # config imports the algorithm registry inside PodSpec.from_dict only
    assert "elegantpod.agents" in graph["elegantpod.config"]
    assert "elegantpod.envs.registry" in graph["elegantpod.envs"]
    # and a planted import closes a cycle through the agents (config -> agents -> checks)
    planted = {m: set(e) for m, e in graph.items()}
    planted["elegantpod.checks.limits"].add("elegantpod.config")
    (group,) = [g for g in import_cycles(planted) if "elegantpod.checks.limits" in g]
    assert {"elegantpod.config", "elegantpod.agents"} <= group
    assert not any(group <= known for known in KNOWN)
    assert _one_cycle(planted, group).startswith("elegantpod.agents -> ")


def test_no_import_cycle_but_the_known_ones():
    graph = import_graph()
    new = [g for g in import_cycles(graph) if not any(g <= known for known in KNOWN)]
    assert not new, "import cycles: " + "; ".join(_one_cycle(graph, g) for g in new)


CLIENTS_OF_FINANCE = ("elegantpod.finance", "elegantpod.cli.demo")
"""Finance, and the demo that shows it off: the only modules that may import finance.
Every other module is generic: it serves every env, so it imports nothing from a domain
package; an env class adds its own through the hooks of
:class:`elegantpod.envs.hooks.EnvHooks` (the CLI reaches ``elegantpod backtest`` by its
module's name, imported only when that command runs)."""


def _is_in(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_generic_layers_import_nothing_from_finance():
    graph = import_graph()
    generic = [m for m in graph if not _is_in(m, CLIENTS_OF_FINANCE)]
    for part in ("config", "agents", "pod", "policy", "cli", "widgets", "search", "clusters"):
        assert any(_is_in(m, [f"elegantpod.{part}"]) for m in generic), part
    assert "elegantpod.tournament.orchestrator" in generic and "elegantpod.cli.main" in generic
    found = {m: sorted(t for t in graph[m] if _is_in(t, ["elegantpod.finance"])) for m in generic}
    found = {m: t for m, t in found.items() if t}
    assert not found, f"generic modules importing finance: {found}"


def test_the_finance_check_sees_an_import_inside_a_function():
    # the trading env imports its baselines inside a classmethod: the graph sees it,
    # so a generic module that did the same would be caught
    assert (
        "elegantpod.finance.trading.baselines" in import_graph()["elegantpod.finance.trading.env"]
    )


def test_checks_import_nothing_from_elegantpod():
    # every layer imports the checks: they must not import any layer back
    assert import_graph()["elegantpod.checks"] <= {"elegantpod.types"}


def test_known_entries_still_apply():
    """A cycle removed leaves no stale entry behind: the list tightens as the work
    lands, so a fixed one cannot come back unnoticed."""
    graph = import_graph()
    cycles = import_cycles(graph)
    stale = [sorted(k) for k in KNOWN if not any(g <= k and len(g) > 1 for g in cycles)]
    assert not stale, f"KNOWN cycles that are gone (delete them): {stale}"


def _private_reaches(path: Path) -> list[str]:
    """``x._name`` in ``path`` where ``x`` is not ``self``, a module-level name of the
    file itself, nor a class of it: a reach into another object's private state."""
    tree = _parse(path)
    own = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") and node.attr.endswith("__"):
            continue
        base = node.value
        if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in own):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_a_segment_steers_its_pod_through_public_methods(tmp_path):
    """Issue 33: segments set ``pod.spec``, decremented ``pod.evaluator.count`` and called
    the learner past the pod; now nothing in them reaches a private attribute of a pod,
    learner, env or evaluator (nor of anything else)."""
    path = PACKAGE / "tournament" / "worker" / "segment.py"
    assert _private_reaches(path) == []
    # and the check can fail
    probe = tmp_path / "probe.py"
    probe.write_text("def f(pod):\n    return pod._restore\n")
    assert _private_reaches(probe) == ["line 2: pod._restore"]


def test_the_architecture_page_names_every_folder_and_only_real_ones():
    """The docs' architecture page is the map a newcomer reads first: every folder of the
    package is on it, and every folder on it exists (the modules are each folder's own
    map, in its ``__init__`` docstring)."""
    import re

    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"^  ([a-z_]+)/ ", page, re.M))
    top = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert top <= named, f"folders missing from the architecture page: {top - named}"
    assert named <= top, f"the architecture page names no such folder: {named - top}"


def folder_order(text: str, pattern: str) -> list[str]:
    """The folders a map lists, in its order (a page's code block, a docstring)."""
    import re

    return re.findall(pattern, text, re.M)


def _climbs(graph, order: list[str], part_of) -> set[tuple[str, str]]:
    found = set()
    for a, targets in graph.items():
        for b in targets:
            pa, pb = part_of(a), part_of(b)
            if pa in order and pb in order and order.index(pb) > order.index(pa):
                found.add((a, b))
    return found


def test_arrows_point_down_the_architecture_pages_order_of_folders():
    """``docs/architecture.md`` lists the folders so that arrows only point down: a
    folder imports only from folders above it, so each can be read, tested and replaced
    knowing only what is above it."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    order = folder_order(page, r"^  ([a-z_]+)/ ")
    assert order[:4] == ["checks", "envs", "search", "agents"] and order[-1] == "cli"

    def top(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in order) else None

    found = _climbs(import_graph(), order, top)
    assert not found, f"imports that climb the order, with no exception: {sorted(found)}"


def test_finance_subfolders_point_one_way():
    """Finance's own map (its ``__init__`` docstring) lists its parts in the order arrows
    point: market data, statistics, reports, the trading env, backtests, the command."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "finance" / "__init__.py").read_text()))
    order = folder_order(doc or "", r"^- ``([a-z_]+)/?``")
    assert order == ["market", "stats", "report", "trading", "backtests", "command"], order

    def part(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "finance" else None

    assert not _climbs(import_graph(), order, part)


def test_the_direction_check_can_fail():
    graph = {"elegantpod.pod.pod": {"elegantpod.policy.policy"}}
    order = ["pod", "policy"]
    found = _climbs(graph, order, lambda m: m.split(".")[1])
    assert found == {("elegantpod.pod.pod", "elegantpod.policy.policy")}


def test_every_folder_has_a_map():
    """Each folder's ``__init__`` docstring names its modules: the map a reader opens."""
    import ast

    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        modules = [
            p.stem for p in init.parent.glob("*.py") if p.stem not in ("__init__", "__main__")
        ]
        missing = [m for m in modules if m not in doc]
        assert not missing, f"{init.relative_to(PACKAGE.parent)} does not name {missing}"


PUBLIC_FACES = {
    "elegantpod",
    "elegantpod.agents",
    "elegantpod.comparison",
    "elegantpod.envs",
    "elegantpod.finance",
    "elegantpod.search",
    "elegantpod.tournament",
    "elegantpod.tracking",
    "elegantpod.widgets",
}
"""The packages whose ``__init__`` is a public face: the names users import
(``from elegantpod.tournament import Store``), each defined in one module of the part.
No other module passes a name on."""


def _top_level(path: Path) -> tuple[dict[str, str], set[str], list[str]]:
    """A module's imported elegantpod names (local name -> module), the names it
    defines (or statements it runs, as ``__main__``), and its ``__all__``."""
    imported, defined, exported = {}, set(), []
    for node in _parse(path).body:
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            defined.add(f"<line {node.lineno}>")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("elegantpod"):
            for a in node.names:
                imported[a.asname or a.name] = node.module
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    exported = [ast.literal_eval(e) for e in node.value.elts]
                elif isinstance(target, ast.Name):
                    defined.add(target.id)
    return imported, defined, exported


def test_no_module_passes_on_a_name_it_does_not_define():
    """No shims, no re-exports (issue 43): a name has one home. Outside the public faces,
    no module lists in ``__all__`` a name it imports, no module is only imports, and no
    package ``__init__`` imports a name at all."""
    found = []
    for module, path in _modules().items():
        if module in PUBLIC_FACES:
            continue
        imported, defined, exported = _top_level(path)
        if path.name == "__init__.py" and not defined:
            found += [f"{module}: imports {n}" for n in imported]
            continue
        found += [f"{module}: re-exports {n}" for n in exported if n not in defined]
        if imported and not defined:
            found.append(f"{module}: only imports")
    assert not found, found


def test_no_module_marks_an_import_as_passed_on():
    """``from x import name as name`` is the explicit re-export idiom (PEP 484's stub
    rule, which ruff honours): it told readers the name lives here too, and the check
    above, which reads ``__all__``, did not see it. Outside the public faces, a module
    imports a name as itself only to use it, so the form has no use."""
    found = []
    for module, path in _modules().items():
        if module in PUBLIC_FACES:
            continue
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ImportFrom):
                found += [
                    f"{module}: from {node.module} import {a.name} as {a.asname}"
                    for a in node.names
                    if a.asname == a.name
                ]
    assert not found, found


def test_tests_import_each_name_from_its_home():
    """Tests import a name from the module that defines it, not through another module
    that imports it (the public faces are tested as users import them: through
    ``elegantpod`` itself, in test_package and the README's and tutorials' code)."""
    mods = _modules()
    found = []
    for path in sorted((PACKAGE.parent / "tests").rglob("*.py")):
        for node in ast.walk(_parse(path)):
            if not isinstance(node, ast.ImportFrom) or node.module not in mods:
                continue
            if node.module == "elegantpod":
                continue
            imported, _, _ = _top_level(mods[node.module])
            for a in node.names:
                if a.name in imported and f"{node.module}.{a.name}" not in mods:
                    found.append(f"{path.name}:{node.lineno} {a.name} from {node.module}")
    assert not found, found
