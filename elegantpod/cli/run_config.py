"""``--preset NAME`` and ``--config FILE``: a run's options from files, under the flags.

A run file is a mapping whose keys are the command's long options (``max_steps`` or
``max-steps``), plus ``hparams`` (``train``: ``{lr: 3.0e-4}``, or per algorithm,
``{sac: {...}, td3: {...}}``, of which ``train`` takes its ``--algo``'s; ``tournament``:
per algorithm), ``env_kwargs`` / ``eval_env_kwargs`` (mappings; ``env_arg`` and
``eval_env_arg`` too), ``search_space`` and ``generator`` (a tournament's mappings),
``description`` (free text), and ``train:`` / ``tournament:`` sections
for keys that only one command takes, so that one file serves both. A ``spec.json`` that
``train --out`` wrote, or a store's ``tournament.json``, is read as the run it records.

Layers, each over the one before: the preset, the config file, the flags given. Mappings
(hparams, env keywords, the generator) merge key by key; a ``null`` resets an option to
its default. Options that act on existing state or widen trust (``import``,
``overwrite``, ``resume``, ``force``, ``allow_remote``) are flags only: a file cannot run
code, delete a run or vouch for itself.

Nothing in a file reaches the network: ``address`` (a Dask scheduler, which can run any
code in the process that connects to it) and every value that is a URL (``store:
s3://...``, ``track_to: http://...``, ``env_kwargs: {data: https://...}``) are refused
unless the command line gives that option itself (``--address``, ``--store``,
``--env-arg data=...``): the file then only repeats what the user vouched for. Local
schemes (``file://``, ``sqlite:///``, ``memory://``) are paths, not network. The check
runs on the text, before any file, socket or cluster is opened.

Every error names the file, the line and the key; the values are then checked by the
same code as the flags' (:func:`RunConfig.locate` adds the key's line to those errors).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checks.overrides import coerce_value, parse_assignments
from elegantpod.checks.text import short
from elegantpod.cli.run_file import RunFile, read_run_file

COMMANDS = ("train", "tournament")
"""The commands that take ``--config`` and ``--preset``."""
FLAGS_ONLY = {
    "import": "it would run code a file names",
    "overwrite": "it deletes an earlier run",
    "resume": "it continues the run already there",
    "force": "it takes over a store from its writer",
    "allow_remote": "it vouches for what a file names",
    "config": "a run file names no other file",
    "preset": "a run file builds on no preset",
}
"""Options a run file may not set, and why."""
CONNECTS = {
    "address": "connecting to a Dask scheduler lets it run code in this process",
}
"""Options a run file may hold only where the command line gives them too, whatever
their value, and why."""
LOCAL_SCHEMES = ("file", "sqlite", "memory")
"""URL schemes that name something on this machine: allowed in a run file."""
_URL = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.\-]*)://|::")
"""A URL (``scheme://``) or an fsspec chain (``simplecache::s3://...``)."""
ALIASES = {"env_arg": "env_kwargs", "eval_env_arg": "eval_env_kwargs"}
MAPPINGS = ("env_kwargs", "eval_env_kwargs", "hparams", "generator", "search_space")
"""Options whose value is a mapping, merged key by key across the layers."""
Where = tuple[RunFile, tuple[str, ...]]


@dataclass(frozen=True)
class Option:
    """A key a run file may hold: its ``argparse`` destination and what its value is."""

    dest: str
    kind: Any
    """``int``, ``float``, ``str``, ``bool`` (a flag) or ``dict`` (a mapping)."""


def _parser_options(command: str) -> dict[str, Option]:
    """The command's long options as run-file keys, read from the parser itself, so a
    flag added to the command line is a key of its files too."""
    from elegantpod.cli.args import parser

    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for action in sub.choices[command]._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        if not longs or action.dest == "help":
            continue
        key = longs[0][2:].replace("-", "_")
        kind = bool if action.nargs == 0 else (action.type or str)
        if isinstance(action, argparse._AppendAction):
            kind = dict if key in ALIASES else list
        out[ALIASES.get(key, key)] = Option(action.dest, kind)
    return out


def options(command: str) -> dict[str, Option]:
    """Every key a run file of ``command`` may hold at its top level."""
    table = {k: v for k, v in _parser_options(command).items() if k not in FLAGS_ONLY}
    table.pop("set", None)  # hparams, in a file
    table["hparams"] = Option("hparams", dict)
    table["description"] = Option("description", str)
    if command == "tournament":  # the spec's mappings that no flag gives whole
        table["generator"] = Option("generator", dict)
        table["search_space"] = Option("search_space", dict)
    return table


# ------------------------------------------------------------------------------ reading
def _options_of(doc: RunFile, command: str) -> tuple[dict[str, Any], dict[str, Where]]:
    """A file's options for ``command`` (its top level, then the command's section) as
    ``{key: value}``, and where each was set."""
    from elegantpod.config import PodSpec
    from elegantpod.tournament.core.spec import TournamentSpec

    values = doc.values
    fields = {
        "train": {f.name for f in dataclasses.fields(PodSpec)},
        "tournament": {f.name for f in dataclasses.fields(TournamentSpec)},
    }
    for kind, names in fields.items():
        if "env_id" in values and set(values) <= names and ("algo" in values) == (kind == "train"):
            return _from_spec(doc, command, kind)
    mine, theirs = options(command), options(_other(command))
    out: dict[str, Any] = {}
    where: dict[str, Where] = {}
    for scope in ((), (command,)):
        block = values if not scope else values.get(command, {})
        if scope and not isinstance(block, dict):
            raise doc.error(scope, f"{command}: must be a mapping of options, got {short(block)}")
        spelled: dict[str, Any] = {}  # key -> how this block spelled it
        for raw, value in block.items():
            path = (*scope, raw)
            key = ALIASES.get(str(raw).replace("-", "_"), str(raw).replace("-", "_"))
            if key in spelled:
                raise doc.error(
                    path,
                    f"{raw!r} sets {key!r} again (as {spelled[key]!r} did): one of them, "
                    "not last-wins",
                )
            spelled[key] = raw
            if not scope and key in COMMANDS:
                continue
            if key in FLAGS_ONLY:
                raise doc.error(
                    path,
                    f"{raw!r} is refused in a run file ({FLAGS_ONLY[key]}): give --"
                    f"{key.replace('_', '-')} on the command line",
                )
            if key == "set":
                raise doc.error(path, "'set' is the command line's: in a run file use hparams:")
            if key not in mine:
                if key in theirs and not scope:
                    raise doc.error(
                        path,
                        f"{raw!r} is a {_other(command)} option; a file that serves "
                        f"both commands keeps it under '{_other(command)}:'",
                    )
                known = sorted(set(mine) | set(COMMANDS))
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f"; keys: {', '.join(known)}"
                raise doc.error(path, f"unknown key {short(raw)}{hint}")
            if key in MAPPINGS and key in out and isinstance(value, dict):
                value = _merge(out[key], value)
            out[key], where[key] = value, (doc, path)
    return out, where


def _other(command: str) -> str:
    return "tournament" if command == "train" else "train"


def _from_spec(doc: RunFile, command: str, kind: str) -> tuple[dict, dict]:
    """A ``spec.json`` (``kind="train"``) or ``tournament.json`` as options."""
    name = "spec.json of elegantpod train" if kind == "train" else "tournament.json"
    if kind != command:
        raise doc.error((), f"this is a {name}: pass it to elegantpod {kind} --config")
    rename = {"env_id": "env", "env_kwargs": "env_kwargs", "eval_env_kwargs": "eval_env_kwargs"}
    out, where = {}, {}
    for raw, value in doc.values.items():
        path = (raw,)
        if raw == "extra":  # lineage and notes: what the run came from, not how it runs
            continue
        if kind == "train" and raw in ("learner_devices", "capture"):
            if value not in (None, [], False if raw == "capture" else []):
                raise doc.error(path, f"{raw}={short(value)} has no elegantpod train option")
            continue
        key = rename.get(raw, raw)
        out[key], where[key] = value, (doc, path)
    return out, where


def _merge(old: Any, new: dict) -> dict:
    """``new`` over ``old``, mapping by mapping (``hparams.sac.lr`` changes that one)."""
    if not isinstance(old, dict):
        return dict(new)
    merged = dict(old)
    for k, v in new.items():
        merged[k] = _merge(merged[k], v) if isinstance(v, dict) and k in merged else v
    return merged


# ------------------------------------------------------------------------------- checks
def _check_value(key: str, value: Any, option: Option, where: Where) -> Any:
    """``value`` in the option's type, or a ``ValueError`` naming file, line and key."""
    doc, path = where
    if option.kind is dict:
        if key in ("env_kwargs", "eval_env_kwargs") and isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise doc.error(path, f"{key} must be a mapping or KEY=VALUE strings")
            from elegantpod.checks.overrides import env_kwargs

            try:
                value = env_kwargs(value)
            except ValueError as exc:
                raise doc.error(path, f"{key}: {exc}") from None
        if not isinstance(value, dict):
            raise doc.error(path, f"{key} must be a mapping (key: value), got {short(value)}")
        return value
    if option.kind is bool:
        if not isinstance(value, bool):
            raise doc.error(path, f"{key} must be true or false, got {short(value)}")
        return value
    if key == "algos" and isinstance(value, list):
        if not value or not all(isinstance(v, str) for v in value):
            raise doc.error(path, f"algos must be algorithm names, got {short(value)}")
        return ",".join(value)
    if option.kind is str:
        if not isinstance(value, str):
            raise doc.error(path, f"{key} must be a string, got {short(value)}")
        return value
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            return coerce_value(value, option.kind, key)
        except ValueError as exc:
            raise doc.error(path, str(exc)) from None
    kind = "an integer" if option.kind is int else "a number"
    raise doc.error(path, f"{key} must be {kind}, got {short(value)}")


def _check_hparams(command: str, value: dict, where: Where, names: set[str]) -> dict:
    """hparams as ``{algo: {name: value}}`` (``"*"``: a plain train mapping, for any
    algorithm)."""
    doc, path = where
    sections = [k for k, v in value.items() if isinstance(v, dict)]
    if sections and len(sections) != len(value):
        plain = next(k for k in value if k not in sections)
        raise doc.error(
            (*path, plain),
            f"hparams mixes per-algorithm sections ({sections[0]}:) with "
            f"hyperparameters ({plain}:); put {plain!r} under an algorithm",
        )
    if not sections and value:
        if command == "tournament":
            raise doc.error(
                path, "a tournament's hparams are per algorithm, e.g. {ppo: {lr: 3.0e-4}}"
            )
        value = {"*": value}
    for algo, section in value.items():
        for name in section:
            if name in names and name != "num_envs":
                inner = (*path, name) if algo == "*" else (*path, algo, name)
                raise doc.error(inner, f"{name} is an option, not a hyperparameter: give "
                                f"{name}: at the top level")  # fmt: skip
    return value


# ---------------------------------------------------------------------------- the result
@dataclass
class RunConfig:
    """What the files set, after the flags took their share: the mappings the commands
    merge under their flags, and where every value came from (for error lines)."""

    hparams: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``{algo: {name: value}}``; ``"*"``: for any algorithm (a train file's plain form)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    eval_env_kwargs: dict[str, Any] = field(default_factory=dict)
    spec_fields: dict[str, Any] = field(default_factory=dict)
    """The tournament spec's mappings that no flag gives whole (``generator``,
    ``search_space``)."""
    where: dict[tuple[str, ...], Where] = field(default_factory=dict)
    """``("max_steps",)``, ``("hparams", "sac", "lr")``, ``("env_kwargs", "data")``..."""

    def train_hparams(self, algo: str | None) -> dict[str, Any]:
        """A train run's hyperparameters from the files: the plain ones and its
        algorithm's section (the sections of other algorithms are a preset's for them)."""
        from elegantpod.agents import get_algo

        out = dict(self.hparams.get("*", {}))
        for name, section in self.hparams.items():
            if name != "*":
                self._known_algo(name)
                if algo is not None and get_algo(name).name == get_algo(algo).name:
                    out.update(section)
        return out

    def tournament_hparams(self, algos: str | None) -> dict[str, dict[str, Any]]:
        """The per-algorithm sections of the algorithms in ``algos`` (all where
        ``algos`` is not known yet: a resume takes the store's)."""
        from elegantpod.agents import get_algo

        use = None
        if algos is not None:
            use = {get_algo(a.strip()).name for a in algos.split(",") if a.strip()}
        out = {}
        for name, section in self.hparams.items():
            self._known_algo(name)
            if use is None or get_algo(name).name in use:
                out[name] = dict(section)
        return out

    def check_hparams(self, algo: str, values: dict[str, Any]) -> None:
        """Check ``algo``'s hyperparameters ``values`` (the files' under the flags');
        an error names the line of the file's key it is about (of this algorithm's
        section, not another's that has a key of the same name)."""
        from elegantpod.agents import get_algo
        from elegantpod.checks.overrides import replace_checked

        learner = get_algo(algo)
        try:
            replace_checked(learner.config_cls(), values)
        except ValueError as exc:
            mine = {
                k: w
                for k, w in self.where.items()
                if k[0] == "hparams" and len(k) == 3 and (k[1] == "*" or _same(k[1], algo))
            }
            raise RunConfig(where=mine).locate(exc) from None

    def _known_algo(self, name: str) -> None:
        from elegantpod.agents import get_algo

        try:
            get_algo(name)
        except ValueError as exc:
            doc, path = self.where[("hparams",)]
            raise doc.error((*path, name), str(exc)) from None

    def locate(self, exc: ValueError) -> ValueError:
        """``exc`` with ``file:line:`` in front where its message names a key (or quotes
        a value) that a file set; unchanged otherwise."""
        text = str(exc)
        if any(text.startswith(f"{doc.name}:") for doc, _ in self.where.values()):
            return exc  # located already
        head = re.split(r"; (valid keys|options|its keywords|keys):", text)[0]
        found = []
        for key, (doc, path) in self.where.items():
            # hparams.ppo.lr before hparams.sac.lr where the message names ppo
            context = all(_word(n, head) for n in key[1:-1] if n != "*")
            for name in _names(key):
                m = _word(name, head)
                if m:
                    found.append((not context, m.start(), doc.where(path)))
        if not found:
            return exc
        return ValueError(f"{min(found)[2]}: {text}")


def _same(name: str, algo: str) -> bool:
    from elegantpod.agents import get_algo

    try:
        return get_algo(name).name == get_algo(algo).name
    except ValueError:
        return False


def _word(name: str, text: str) -> re.Match | None:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)


def _names(key: tuple[str, ...]) -> list[str]:
    """How an error message may name ``key``."""
    last = key[-1]
    extra = {"env": ["env id", "env_id"], "algo": ["algorithm"], "out": ["--out"]}
    return [last, *extra.get(last, [])] if len(key) == 1 else [last]


# ------------------------------------------------------------------------------ applying
def apply_run_files(args, argv: list[str]) -> RunConfig | None:
    """Read ``--preset`` and ``--config``, set on ``args`` every option that no flag
    gave, and return the mappings and lines (``None`` where no file was named)."""
    command = args.command
    preset, config = getattr(args, "preset", None), getattr(args, "config", None)
    if command not in COMMANDS or (preset is None and config is None):
        return None
    from elegantpod.cli.args import given_options
    from elegantpod.cli.presets import read_preset

    docs = ([read_preset(preset)] if preset is not None else []) + (
        [read_run_file(config)] if config is not None else []
    )
    table = options(command)
    given = given_options(argv)
    merged: dict[str, Any] = {}
    where: dict[tuple[str, ...], Where] = {}  # options, and the keys inside mappings
    for doc in docs:
        values, places = _options_of(doc, command)
        for key, value in values.items():
            if key not in table:
                raise places[key][0].error(places[key][1], f"unknown key {short(key)}")
            if value is None or key in ("workers", "address"):  # None: back to the default
                for k in [k for k in where if k[0] in (key, *_EXCLUDES.get(key, ()))]:
                    where.pop(k)
                    merged.pop(k[0], None)
                if value is None:
                    continue
            doc_, path = places[key]
            value = _check_value(key, value, table[key], places[key])
            if key == "hparams":
                value = _check_hparams(command, value, places[key], set(table))
                for algo, section in value.items():
                    for name in section:
                        inner = (*path, name) if algo == "*" else (*path, algo, name)
                        where[(key, algo, name)] = (doc_, inner)
                if "*" in value:  # plain keys over every section a layer below set
                    for algo in merged.get(key, {}):
                        merged[key][algo].update(value["*"])
            elif key in ("env_kwargs", "eval_env_kwargs"):
                for name in value:
                    where[(key, name)] = (doc_, (*path, name))
            if key in MAPPINGS and key in merged:
                value = _merge(merged[key], value)
            merged[key], where[(key,)] = value, places[key]
    for dest in ("workers", "address"):
        if dest in given:
            merged.pop(_EXCLUDES[dest][0], None)
    over = {("hparams", n.partition(".")[2] or n) for n in parse_assignments(args.set)}
    over |= {("env_kwargs", k) for k in parse_assignments(getattr(args, "env_arg", []))}
    over |= {("eval_env_kwargs", k) for k in parse_assignments(getattr(args, "eval_env_arg", []))}
    if "num_envs" in given:  # the flag beats the files' hparams.num_envs
        over.add(("hparams", "num_envs"))
        for section in merged.get("hparams", {}).values():
            section.pop("num_envs", None)
    _refuse_network(
        merged, where, {table[k].dest for k in merged if k in table} & given, table, over
    )
    cfg = RunConfig()
    for key, value in merged.items():
        if key in MAPPINGS:
            if key in ("hparams", "env_kwargs", "eval_env_kwargs"):
                setattr(cfg, key, value)
            else:
                cfg.spec_fields[key] = value
        elif key != "description" and table[key].dest not in given:
            setattr(args, table[key].dest, value)
        else:
            continue
        for k, w in where.items():
            if k[0] == key and (k[0], k[-1]) not in over:
                cfg.where[k] = w
    return cfg


_EXCLUDES = {"workers": ("address",), "address": ("workers",)}


def _remote(value: Any) -> str | None:
    """The first string in ``value`` (nested lists and mappings too) that names
    something off this machine: a URL whose scheme is not local."""
    if isinstance(value, str):
        m = _URL.search(value)
        if m and (m.group(1) or "").lower() not in LOCAL_SCHEMES:
            return value
        return None
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, dict | list | tuple):
        for item in items:
            found = _remote(item)
            if found is not None:
                return found
    return None


def _refuse_network(
    merged: dict[str, Any],
    where: dict[tuple[str, ...], Where],
    given: set[str],
    table: dict[str, Option],
    over: set[tuple[str, str]],
) -> None:
    """Refuse what would make this run reach the network on a file's word alone:
    :data:`CONNECTS` options and URL values that no flag gave (see the module
    docstring). ``given``: the destinations of the flags on the command line; ``over``:
    the mapping keys that ``--set`` and ``--env-arg`` gave."""
    for key, value in merged.items():
        flag = "--" + key.replace("_", "-")
        if key in CONNECTS and table[key].dest not in given:
            doc, path = where[(key,)]
            raise doc.error(
                path,
                f"{key!r} is refused in a run file ({CONNECTS[key]}): give {flag} on the "
                "command line if you trust that scheduler",
            )
        if key in MAPPINGS and isinstance(value, dict):
            cli = {"env_kwargs": "--env-arg", "eval_env_kwargs": "--eval-env-arg"}.get(key)
            for name, inner in value.items():
                url = _remote(inner)
                if url is None or (key, name) in over:
                    continue
                doc, path = where.get((key, name)) or where[(key,)]
                how = f"{cli} {name}={short(url)}" if cli else "the command line"
                raise doc.error(
                    path if (key, name) in where else (*path, name),
                    f"{key}.{name} is a URL ({short(url)}), and nothing in a run file "
                    f"reaches the network: give {how} yourself",
                )
        elif key in table and table[key].dest not in given:
            url = _remote(value)
            if url is not None:
                doc, path = where[(key,)]
                raise doc.error(
                    path,
                    f"{key} is a URL ({short(url)}), and nothing in a run file reaches the "
                    f"network: give {flag} on the command line yourself",
                )
