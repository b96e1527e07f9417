"""The package namespace as ``dir()`` and tab completion show it (issue 32), and no
submodule shadows one of its functions (issue 33)."""

import ast
import subprocess
import sys
from pathlib import Path

INIT = Path(__file__).resolve().parents[1] / "elegantpod" / "__init__.py"


def test_dir_lists_each_public_name_once_and_no_helper_imports():
    code = (
        "import elegantpod; elegantpod.train; elegantpod.Tournament; "
        "print(' '.join(dir(elegantpod)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names = out.stdout.split()
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {"train", "Tournament", "Pod", "TrainResult", "__version__"} <= set(names)
    for leak in ("importlib", "sys", "_importlib", "_sys", "_types", "_WHERE", "_Package"):
        assert leak not in names
    import elegantpod

    assert set(elegantpod.__all__) <= set(dir(elegantpod))


def test_cluster_is_the_function_after_every_submodule_is_imported():
    """A submodule named like a package function replaces it when imported (Python sets
    the package attribute); ``elegantpod.cluster`` once was both. Every module is
    imported here in a fresh interpreter, and the package's functions must survive."""
    code = (
        "import importlib, pkgutil, types\n"
        "import elegantpod\n"
        "import elegantpod.clusters.cluster\n"
        "for info in pkgutil.walk_packages(elegantpod.__path__, 'elegantpod.'):\n"
        "    if not info.name.endswith('__main__'):  # python -m elegantpod.cli runs it\n"
        "        importlib.import_module(info.name)\n"
        "assert type(elegantpod) is types.ModuleType, type(elegantpod)\n"
        "assert isinstance(elegantpod.cluster, types.FunctionType), elegantpod.cluster\n"
        "assert elegantpod.cluster.__name__ == 'cluster'\n"
        "assert elegantpod.cluster is elegantpod.clusters.cluster.cluster\n"
        "shadowed = [n for n in elegantpod.__all__ if n != 'finance'\n"
        "            and isinstance(getattr(elegantpod, n), types.ModuleType)]\n"
        "assert not shadowed, shadowed\n"
        "print(len(list(pkgutil.walk_packages(elegantpod.__path__, 'elegantpod.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 40  # the walk really imported the package


def test_the_package_has_no_import_hook():
    """``elegantpod/__init__.py`` imports lazily (PEP 562) and patches nothing of the
    import system: no finder on ``sys.meta_path``, no module class swapped in."""
    source = INIT.read_text(encoding="utf-8")
    for hook in ("meta_path", "path_hooks", "sys.modules", "__class__", "__setattr__"):
        assert hook not in source, hook
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    # import_module for the lazy names is all it takes from importlib
    assert imported <= {"importlib"}, imported
    assert not any(isinstance(n, ast.ClassDef) for n in ast.walk(ast.parse(source)))


def test_the_package_says_it_is_typed():
    """PEP 561: type checkers read the package's annotations only with ``py.typed``."""
    import importlib.resources

    import tomllib

    assert (importlib.resources.files("elegantpod") / "py.typed").is_file()
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["elegantpod"]


# The command line's own output, and progress lines a caller asked for (progress=True).
PRINTS = {
    "cli/main.py",
    "cli/commands.py",
    "cli/demo.py",
    "tournament/progress.py",
    "finance/command.py",
    "comparison/command.py",
    "finance/backtests/walkforward.py",
}


def test_library_messages_go_through_logging_not_print():
    """Outside the CLI's own output, the library speaks through
    ``logging.getLogger("elegantpod")`` (a module's ``getLogger(__name__)`` is under it):
    a user silences it, or sends it to a file, with the logging module."""
    package = INIT.parent
    printing = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                printing.add(path.relative_to(package).as_posix())
    assert printing <= PRINTS, f"print() outside the CLI: {sorted(printing - PRINTS)}"


def test_the_cli_shows_library_messages_and_restores_logging(capsys):
    import logging

    from elegantpod.cli.main import _show_library_messages, main

    lib = logging.getLogger("elegantpod")
    before = (lib.level, lib.propagate, list(lib.handlers))
    handler = _show_library_messages(quiet=False)
    try:
        logging.getLogger("elegantpod.training").info("nothing to train")
        logging.getLogger("elegantpod.other").debug("not shown")
    finally:
        lib.removeHandler(handler)
    assert capsys.readouterr().err == "elegantpod: nothing to train\n"
    lib.setLevel(before[0])
    lib.propagate = before[1]
    # a command leaves the caller's logging as it was
    assert main(["train", "--env", "NoSuchEnv-v0", "--algo", "ppo"]) == 2
    assert (lib.level, lib.propagate, list(lib.handlers)) == before
    assert "NoSuchEnv-v0" in capsys.readouterr().err


def test_make_uses_a_venv_set_up_with_more_extras_without_reinstalling(tmp_path):
    """After ``make bench`` (extras test,bench), ``make test``, ``make docs`` and ``make
    setup`` use that venv as it is; a venv lacking an extra is installed with the extras
    asked; a fresh ``make setup`` installs the library, ``make test`` the test extra."""
    import os
    import shutil
    import subprocess
    import time

    root = Path(__file__).resolve().parents[1]
    venv = tmp_path / "venv"
    venv.mkdir()
    later = time.time() + 60  # newer than the Makefile and pyproject.toml
    stamp = venv / ".installed-test,bench"
    stamp.touch()
    os.utime(stamp, (later, later))
    make = shutil.which("make")

    def plan(*args):
        cmd = [make, "-n", "-C", str(root), "setup", f"VENV={venv}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    # make setup's default (notebook,finance) and bench are within test,bench's packages
    assert "Nothing to be done" in plan() + plan("EXTRAS=bench")
    wider = plan("EXTRAS=test,gcs")
    assert 'pip install --quiet -e ".[test,gcs]"' in wider, wider
    # a fresh venv: the library for `make setup`, the whole test extra for `make test`
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert 'pip install --quiet -e ".[notebook,finance]"' in plan(f"VENV={fresh}")
    cmd = [make, "-n", "-C", str(root), "test", f"VENV={fresh}"]
    tests = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert 'pip install --quiet -e ".[test]"' in tests, tests
