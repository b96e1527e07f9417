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
        elegantpod.finance.backtest,
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
