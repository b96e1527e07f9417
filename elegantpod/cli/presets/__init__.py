"""Presets: run files shipped in the package, for the tasks where the defaults are not
enough (``--preset mujoco``). Each is a run file of the same format as ``--config``
(:mod:`elegantpod.cli.run_config`), read through the same checks; its ``description`` is the
line ``elegantpod presets`` shows. Where the figures each reaches were measured: the
docs' command-line guide (``docs/guides/cli.md``, "Presets")."""

from __future__ import annotations

from importlib import resources

from elegantpod.cli.run_file import RunFile, parse_run_file


def preset_names() -> list[str]:
    """The shipped presets, by name (``mujoco``...)."""
    files = resources.files(__name__).iterdir()
    return sorted(f.name[: -len(".yaml")] for f in files if f.name.endswith(".yaml"))


def read_preset(name: str) -> RunFile:
    """The preset ``name``, parsed; ``ValueError`` listing the presets for another name
    (a name is looked up among the shipped files, never used as a path)."""
    names = preset_names()
    if name not in names:
        raise ValueError(f"unknown preset {name[:200]!r}; presets: {', '.join(names)}")
    text = resources.files(__name__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    return parse_run_file(text, f"preset {name}")


def preset_lines() -> list[str]:
    """One line per preset: its name and description (``elegantpod presets``)."""
    lines = []
    for name in preset_names():
        description = read_preset(name).values.get("description", "")
        lines.append(f"{name:<10} {description}")
    return lines
