"""The package namespace as ``dir()`` and tab completion show it (issue 32)."""

import subprocess
import sys


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
