"""A run file (``--config run.yaml``) read as untrusted input, every key with its line.

Why lines: an error in a file someone edits by hand must say where it is
(``run.yaml:7: unknown key 'max_step'``), so values are kept together with the line of
the key that set them. Why so careful: a run file may come from someone else (a
colleague's ``spec.json``, a shared store's ``tournament.json``), so it is read with
``yaml.safe_load``'s constructors only (no ``!!python/...`` tag builds an object), at
most :data:`MAX_BYTES` bytes, no alias (``*name``) expands, nesting is bounded, and a key
given twice is an error rather than a silent last-one-wins.

YAML or JSON: a ``.json`` name or text that starts with ``{`` is JSON (read by
:mod:`json`, so ``1e-3`` is a number as JSON says); anything else is YAML.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checks.text import MAX_SHOWN, short

MAX_BYTES = 1 << 20
"""Largest run file read (1 MiB; a real one is a few hundred bytes)."""
MAX_DEPTH = 16
"""Deepest nesting of mappings and lists in a run file."""
MAX_NODES = 100_000
"""Most values (scalars, lists, mappings) in a run file."""

Path = tuple[str, ...]


@dataclass(frozen=True)
class RunFile:
    """A run file's top-level mapping and where each key stands in it."""

    name: str
    """How errors name the file (the path as given, or ``preset mujoco``)."""
    values: dict[str, Any]
    """The file's mapping: plain JSON values (dicts, lists, strings, numbers, booleans)."""
    lines: dict[Path, int] = field(default_factory=dict)
    """1-based line of each key, by its path (``("hparams", "ppo", "lr")``)."""

    def line(self, path: Path) -> int | None:
        """The line of ``path``'s key, or of its closest enclosing key."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def where(self, path: Path) -> str:
        """``name:line`` of ``path`` (``name`` alone where the line is unknown)."""
        line = self.line(path)
        return f"{self.name}:{line}" if line is not None else self.name

    def error(self, path: Path, message: str) -> ValueError:
        """A ``ValueError`` that names the file, the line and the key."""
        return ValueError(f"{self.where(path)}: {message}")


def read_run_file(path: str | os.PathLike) -> RunFile:
    """Read and parse the run file at ``path`` (see the module docstring).

    Raises
    ------
    ValueError
        For a missing, unreadable, oversized or non-regular file, a parse error (with
        its line), a top level that is not a mapping, a key given twice, an alias, an
        unknown tag or nesting past :data:`MAX_DEPTH`.
    """
    from elegantpod.safe_files import UnsafeFileError, read_bytes

    name = os.fspath(path)
    try:
        data = read_bytes(name, MAX_BYTES)
    except FileNotFoundError:
        raise ValueError(f"--config {short(name)}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"--config {short(name)} is a folder, not a file") from None
    except UnsafeFileError as exc:
        raise ValueError(f"--config: {exc}") from None
    except OSError as exc:
        raise ValueError(f"--config {short(name)}: {exc.strerror or exc}") from None
    return parse_run_file(data, name)


def parse_run_file(
    data: bytes | str, name: str, what: str = "a run file is a mapping of options"
) -> RunFile:
    """Parse a run file's contents (``name`` says how errors name it, ``what`` what its
    top level must be: a search space file is parsed the same way)."""
    if isinstance(data, bytes):
        if len(data) > MAX_BYTES:
            raise ValueError(f"{name}: {len(data):,} bytes; a run file holds at most {MAX_BYTES:,}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    else:
        text = data
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ValueError(f"{name}:{line}: a NUL byte: a run file is text (YAML or JSON)")
    is_json = name.lower().endswith(".json") or text.lstrip().startswith("{")
    try:
        values, lines = _parse_json(text, name) if is_json else _parse_yaml(text, name)
    except RecursionError:
        raise ValueError(f"{name}: nested too deeply (at most {MAX_DEPTH} levels)") from None
    if not isinstance(values, dict):
        kinds = {list: "a list", str: "a string", int: "a number", float: "a number"}
        got = "nothing" if values is None else kinds.get(type(values), "a value")
        raise ValueError(f"{name}:1: {what} (key: value), got {got}")
    _check_size(values, name)
    return RunFile(name=name, values=values, lines=lines)


def _check_size(value: Any, name: str) -> None:
    count, stack = 0, [(value, 1)]
    while stack:
        v, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise ValueError(f"{name}: nested too deeply (at most {MAX_DEPTH} levels)")
        if count > MAX_NODES:
            raise ValueError(f"{name}: more than {MAX_NODES:,} values")
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)


# ----------------------------------------------------------------------------- YAML
def _parse_yaml(text: str, name: str) -> tuple[Any, dict[Path, int]]:
    """The document built by ``yaml.SafeLoader`` from composed nodes, which keep the
    line of every key (``safe_load`` itself forgets them)."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        lines: dict[Path, int] = {}
        _yaml_walk(node, (), lines, set(), name, 1)
        return _plain(loader.construct_document(node), name), lines
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        what = exc.problem or exc.context or "not YAML"
        if "could not determine a constructor" in str(exc):
            what = f"{what}; a run file holds plain values only (no tags)"
        raise ValueError(f"{name}{line}: {what}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{name}: not YAML: {str(exc)[:MAX_SHOWN]}") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        if str(exc).startswith(name):
            raise
        raise ValueError(f"{name}: {str(exc)[:MAX_SHOWN]}") from None
    finally:
        loader.dispose()


def _plain(value: Any, name: str) -> Any:
    """YAML's values as JSON's: a date is its ISO text (``start: 2016-01-01`` means the
    string), and a set or binary (safe tags, but no JSON values) is refused."""
    import datetime

    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise ValueError(f"{name}: keys must be names, got {short(bad[0])}")
        return {k: _plain(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, name) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ValueError(
        f"{name}: {type(value).__name__} values are not accepted in a run file (plain "
        "strings, numbers, booleans, lists and mappings only)"
    )


def _yaml_walk(node, path: Path, lines: dict, seen: set, name: str, depth: int) -> None:
    import yaml

    if id(node) in seen:
        raise ValueError(
            f"{name}:{node.start_mark.line + 1}: anchors and aliases (&name, *name) are not "
            "accepted in a run file"
        )
    seen.add(id(node))
    if depth > MAX_DEPTH:
        raise ValueError(
            f"{name}:{node.start_mark.line + 1}: nested too deeply (at most {MAX_DEPTH} levels)"
        )
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                raise ValueError(
                    f"{name}:{key.start_mark.line + 1}: keys must be plain names (no "
                    "lists, mappings or '<<' merges as keys)"
                )
            line = key.start_mark.line + 1
            if key.value in first:
                raise ValueError(
                    f"{name}:{line}: key {short(key.value)} given twice (first at line "
                    f"{first[key.value]})"
                )
            first[key.value] = line
            lines[(*path, key.value)] = line
            _yaml_walk(value, (*path, key.value), lines, seen, name, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _yaml_walk(item, path, lines, seen, name, depth + 1)
    elif (
        isinstance(node, yaml.ScalarNode)
        and node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
        and ":" in node.value
    ):
        # YAML 1.1 reads 190:20:30 as base 60 (685,230): nobody means that in a run file
        raise ValueError(
            f"{name}:{node.start_mark.line + 1}: {short(node.value)} is a base-60 number to "
            "YAML (1.1); write the number itself, or quote it if it is text"
        )


# ----------------------------------------------------------------------------- JSON
def _parse_json(text: str, name: str) -> tuple[Any, dict[Path, int]]:
    try:
        values = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}:{exc.lineno}: not JSON: {exc.msg}") from None
    except ValueError as exc:  # NaN, or an integer of more digits than Python converts
        raise ValueError(f"{name}: {str(exc)[:MAX_SHOWN]}") from None
    return values, _json_key_lines(text, name)


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number (a run file takes finite numbers)")


def _json_key_lines(text: str, name: str) -> dict[Path, int]:
    """The line of every object key of valid JSON ``text``, by its path; a key given
    twice in one object is an error (``json.loads`` keeps the last silently)."""
    from json.decoder import scanstring

    lines: dict[Path, int] = {}
    # each open container: (path, "{" or "[", keys seen in it)
    stack: list[tuple[Path, str, dict[str, int]]] = []
    last_key: str | None = None
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == '"':
            value, end = scanstring(text, i + 1)
            j = end
            while j < n and text[j] in " \t\r\n":
                j += 1
            if stack and stack[-1][1] == "{" and j < n and text[j] == ":":
                path, _, seen = stack[-1]
                if value in seen:
                    raise ValueError(
                        f"{name}:{line}: key {short(value)} given twice (first at line "
                        f"{seen[value]})"
                    )
                seen[value] = line
                lines[(*path, value)] = line
                last_key = value
            line += text.count("\n", i, end)
            i = end
            continue
        elif c in "{[":
            parent = stack[-1] if stack else None
            if parent is None:
                path: Path = ()
            elif parent[1] == "{" and last_key is not None:
                path = (*parent[0], last_key)
            else:  # inside a list: the list's own key stands for its items
                path = parent[0]
            stack.append((path, c, {}))
            last_key = None
        elif c in "}]":
            stack.pop()
            last_key = None
        i += 1
    return lines
