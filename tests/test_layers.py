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
    planted["elegantpod.checks"].add("elegantpod.config")
    (group,) = [g for g in import_cycles(planted) if "elegantpod.checks" in g]
    assert {"elegantpod.config", "elegantpod.agents"} <= group
    assert not any(group <= known for known in KNOWN)
    assert _one_cycle(planted, group).startswith("elegantpod.agents -> ")


def test_no_import_cycle_but_the_known_ones():
    graph = import_graph()
    new = [g for g in import_cycles(graph) if not any(g <= known for known in KNOWN)]
    assert not new, "import cycles: " + "; ".join(_one_cycle(graph, g) for g in new)


GENERIC = ("elegantpod.tournament", "elegantpod.envs", "elegantpod.cli")
"""The generic layers: they serve every env, so they import nothing from a domain
package such as finance; an env class adds its own through the hooks of
:class:`elegantpod.envs.hooks.EnvHooks`."""


def _is_in(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_generic_layers_import_nothing_from_finance():
    graph = import_graph()
    generic = [m for m in graph if _is_in(m, GENERIC)]
    assert "elegantpod.tournament.orchestrator" in generic and "elegantpod.cli" in generic
    assert "elegantpod.envs.registry" in generic
    found = {m: sorted(t for t in graph[m] if _is_in(t, ["elegantpod.finance"])) for m in generic}
    found = {m: t for m, t in found.items() if t}
    assert not found, f"generic modules importing finance: {found}"


def test_the_finance_check_sees_an_import_inside_a_function():
    # the trading env imports its baselines inside a classmethod: the graph sees it,
    # so a generic module that did the same would be caught
    assert "elegantpod.finance.baselines" in import_graph()["elegantpod.finance.trading_env"]


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
    path = PACKAGE / "tournament" / "segment.py"
    assert _private_reaches(path) == []
    # and the check can fail
    probe = tmp_path / "probe.py"
    probe.write_text("def f(pod):\n    return pod._restore\n")
    assert _private_reaches(probe) == ["line 2: pod._restore"]


def test_the_readme_architecture_names_every_module_and_only_real_ones():
    """The README's layout is the map a newcomer reads first: every module is on it
    (by file name), and every file name on it exists."""
    import re

    readme = (PACKAGE.parent / "README.md").read_text()
    start = readme.index("### Architecture")
    block = readme[start : readme.index("\n## ", start)]
    named = set(re.findall(r"\b([a-z_0-9]+\.py)\b", block))
    files = {p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert not files - named, f"modules missing from the README's architecture: {files - named}"
    assert not named - files, f"the README's architecture names no such file: {named - files}"
