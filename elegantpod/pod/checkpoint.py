"""Checkpoints: atomic writes, ``weights_only`` loads, clear errors.

A checkpoint is a plain dict of tensors, numbers and strings (the pod spec as JSON), so
``torch.load(..., weights_only=True)`` can read it: loading never runs pickled code. A
checkpoint may come from anyone, so every field is checked before use, errors name the
file and the field, and files or URLs that its spec names are not read on its say-so.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
from pathlib import Path
from typing import Any

import torch

from elegantpod.checks.json_values import check_json
from elegantpod.config import PodSpec
from elegantpod.devices import AUTO_DEVICE
from elegantpod.safe_files import UnsafeFileError, atomic_write_bytes, open_file

FORMAT = "elegantpod-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the learner it is loaded into."""


MAX_CHECKPOINT_BYTES = 64 * 2**30
"""Largest checkpoint file loaded (its size is checked before a byte is read): above
what a pod's replay plus networks fill in the memory of any one machine it runs on."""


def _is_url(path: str | os.PathLike) -> bool:
    s = os.fspath(path)
    return "://" in s and not s.startswith("file://")


def checkpoint_exists(path: str | os.PathLike) -> bool:
    """Whether a file stands at ``path`` (a local path or an fsspec URL); its content is
    not checked (:func:`load_checkpoint` does that)."""
    if _is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(os.fspath(path))
        return fs.exists(p)
    return Path(path).is_file()


CHECKPOINT_FILE = "checkpoint.pt"
"""A run folder's latest checkpoint: where a resumed run continues from."""
BEST_FILE = "best.pt"
"""A run folder's checkpoint of its best evaluation: the agent to use."""


def resolve_checkpoint(path: str | os.PathLike) -> str | os.PathLike:
    """A checkpoint file from ``path``: a local run folder gives its ``best.pt`` (the
    best evaluation), else its ``checkpoint.pt``; anything else is returned unchanged."""
    if _is_url(path) or not Path(path).is_dir():
        return path
    for name in (BEST_FILE, CHECKPOINT_FILE):
        if (Path(path) / name).is_file():
            return Path(path) / name
    raise CheckpointError(
        f"checkpoint {os.fspath(path)!r} is a folder with no {BEST_FILE} or {CHECKPOINT_FILE}"
        " (a tournament's store? elegantpod.Deployment.of(store) takes its best agent)"
    )


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> str:
    """Save ``payload`` atomically: a reader sees the old file or the new one, never half.

    ``path`` is a local path or an fsspec URL (object stores write one object at once).
    """
    return write_checkpoint_bytes(path, checkpoint_bytes(payload))


def checkpoint_bytes(payload: dict[str, Any]) -> bytes:
    """``payload`` serialized as a checkpoint, in memory: a snapshot of the state now.

    Taking it is the only part of a save that must happen before training goes on; the
    write (:func:`write_checkpoint_bytes`) may run in another thread meanwhile.
    """
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "version": VERSION, **payload}, buf)
    return buf.getvalue()


def write_checkpoint_bytes(path: str | os.PathLike, data: bytes) -> str:
    """Write serialized checkpoint ``data`` atomically to a local path or an fsspec URL."""
    if _is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(os.fspath(path))
        fs.pipe_file(p, data)
        return os.fspath(path)
    atomic_write_bytes(path, data)
    return os.fspath(path)


def load_checkpoint(
    path: str | os.PathLike, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Load a checkpoint safely (``weights_only=True``).

    Raises
    ------
    CheckpointError
        If the file is missing, corrupt, or not an elegantpod checkpoint.
    """
    if _is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(os.fspath(path))
        if not fs.exists(p):
            raise CheckpointError(f"checkpoint {os.fspath(path)!r} does not exist")
        if fs.size(p) > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(
                f"checkpoint {os.fspath(path)!r} is over the limit of {MAX_CHECKPOINT_BYTES} bytes"
            )
        source: Any = io.BytesIO(fs.cat_file(p))
    else:
        # A regular file only (a FIFO would block, /dev/zero never ends), of bounded size;
        # a store's path (a RootedPath) is reached from its root without a link.
        try:
            source = open_file(path, MAX_CHECKPOINT_BYTES)
        except IsADirectoryError:
            raise CheckpointError(
                f"checkpoint {os.fspath(path)!r} is a folder, not a file "
                f"(a pod's is {str(Path(path) / 'checkpoint.pt')!r})"
            ) from None
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {os.fspath(path)!r} does not exist") from None
        except UnsafeFileError as exc:
            raise CheckpointError(_unsafe(path, exc)) from None
        except OSError as exc:
            raise CheckpointError(f"checkpoint {os.fspath(path)!r}: {exc}") from None
        path = Path(path)
    with source:
        _check_archive(source, path)
        try:
            data = torch.load(source, map_location=map_location, weights_only=True)
        except Exception as exc:  # torch raises several types for truncated/garbage files
            raise CheckpointError(
                f"checkpoint {str(path)!r} is corrupt or not a torch file: {_reason(exc)}"
            ) from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} is not an elegantpod checkpoint")
    if data.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has format version {data.get('version')!r}; "
            f"this elegantpod reads version {VERSION}"
        )
    check_tensors(data, f"checkpoint {str(path)!r}")
    return data


def _check_archive(source, path) -> None:
    """Refuse a file that is not a torch zip archive of stored (uncompressed) entries
    whose sizes add up to at most the file's own.

    Why: ``torch.save`` stores every tensor's bytes uncompressed, so a checkpoint's
    tensors can never hold more bytes than its file. A hand-made archive may deflate a
    gigabyte of zeros into a kilobyte entry, which ``torch.load`` would inflate in memory
    before anything could be checked; the legacy (non-zip) format has no directory to
    check at all.
    """
    import zipfile

    where = f"checkpoint {str(path)!r}"
    start = source.tell()
    size = source.seek(0, io.SEEK_END) - start
    source.seek(start)
    try:
        with zipfile.ZipFile(source) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CheckpointError(
            f"{where} is corrupt or not a torch file: not a zip archive ({_reason(exc)})"
        ) from None
    finally:
        source.seek(start)
    packed = [e.filename for e in entries if e.compress_type != zipfile.ZIP_STORED]
    if packed:
        raise CheckpointError(
            f"{where} holds compressed entries ({packed[0][:80]!r}...): torch.save writes "
            "none, and one could inflate to gigabytes"
        )
    total = sum(e.file_size for e in entries)
    if total > size:
        raise CheckpointError(
            f"{where}: its entries claim {total:,} bytes in a file of {size:,} bytes"
        )


_TENSOR_DTYPES = frozenset(
    {
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
    }
)
"""What a checkpoint's tensors may hold: no complex, quantized or exotic types."""
MAX_NESTING = 32
"""Deepest nesting of dicts and lists a checkpoint may have."""


def check_tensors(data: Any, where: str) -> int:
    """Check every tensor in ``data`` (nested dicts, lists and tuples) before any is
    used; return how many elements they hold.

    A tensor must be dense and strided, of a plain real dtype, with no dimension of
    stride 0 (unless its size is 0 or 1), no two elements in the same memory, its view
    inside its storage, and no NaN (infinities are checked by the fields that allow
    them: a PPO action bound may be infinite, a weight may not). Why: ``weights_only``
    keeps a checkpoint from running code, not from describing tensors that lie. A
    stride-0 "1 GB" weight takes 4 bytes in the file and gigabytes once copied;
    overlapping optimizer moments crash the in-place kernels that update them; a NaN
    weight trains to nothing silently.

    Raises
    ------
    CheckpointError
        Naming the tensor's place (``learner.actor.net.0.weight``) and what is wrong.
    """
    total = 0
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        name, value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise CheckpointError(f"{where}: {name or 'it'} is nested too deeply")
        if isinstance(value, dict):
            stack.extend(
                (f"{name}.{k}" if name else str(k), v, depth + 1) for k, v in value.items()
            )
        elif isinstance(value, list | tuple):
            stack.extend((f"{name}[{i}]", v, depth + 1) for i, v in enumerate(value))
        elif isinstance(value, torch.Tensor):
            problem = _tensor_problem(value)
            if problem:
                raise CheckpointError(f"{where}: tensor {name[:120]!r} {problem}")
            total += value.numel()
    return total


def _tensor_problem(t: torch.Tensor) -> str | None:
    """What makes ``t`` unusable as a checkpoint's tensor, or ``None``."""
    if t.layout != torch.strided or t.is_quantized or t.is_meta:
        return f"has layout {t.layout} (only dense tensors are saved)"
    if t.dtype not in _TENSOR_DTYPES:
        return f"has dtype {t.dtype} (a real float, integer or bool is expected)"
    dims = [(st, sz) for sz, st in zip(t.shape, t.stride(), strict=True) if sz > 1]
    if any(st <= 0 for st, _ in dims):
        return f"has a stride of 0 or less (shape {tuple(t.shape)}, strides {t.stride()})"
    extent = 1  # elements spanned by the dimensions of smaller strides
    for st, sz in sorted(dims):
        if st < extent:
            return f"overlaps itself (shape {tuple(t.shape)}, strides {t.stride()})"
        extent = st * (sz - 1) + extent
    if (
        t.numel()
        and (t.storage_offset() + extent) * t.element_size() > t.untyped_storage().nbytes()
    ):
        return f"reaches past its storage (shape {tuple(t.shape)}, offset {t.storage_offset()})"
    if t.is_floating_point() and t.numel() and bool(torch.isnan(t).any()):
        return "holds NaN values"  # infinities: each field says where it allows them
    return None


# -- tensors against what loads them ------------------------------------------------------
# check_tensors judges each tensor alone; whether it fits the network or optimizer that
# loads it only that network or optimizer can tell. Torch's own loads copy into each
# parameter whatever has its shape (casting an int or bool weight), and an optimizer
# takes any moment at all: these checks come first.


def check_module_state(
    module: torch.nn.Module, state: Any, where: str, field: str, network: str
) -> None:
    """Raise :class:`CheckpointError` unless ``state`` holds exactly ``module``'s own
    tensors: its names, and for each its shape and dtype, floats all finite.

    Why: ``load_state_dict`` casts an ``int64`` or ``bool`` weight to the parameter's
    dtype without a word, and an infinite weight acts as NaN from the first step on. A
    pod and a :class:`~elegantpod.policy.policy.Policy` load the same networks from the
    same files, so both check them here and refuse the same files.

    Parameters
    ----------
    where
        ``checkpoint '<path>'``: how errors name the file.
    field
        The state's place in the checkpoint (``learner.modules.actor``).
    network
        How errors name what it should fit (``this ppo network (hidden=(64, 64))``).
    """
    if not isinstance(state, dict):
        raise CheckpointError(f"{where}: field {field!r} is missing or not a dict of tensors")
    own = module.state_dict()
    lacks = sorted(k for k in own if k not in state)
    extra = sorted(str(k)[:60] for k in state if k not in own)
    if lacks or extra:
        said = [f"it lacks {lacks[:8]}"] if lacks else []
        said += [f"it has no place for {extra[:8]}"] if extra else []
        raise CheckpointError(f"{where}: field {field!r} does not fit {network}: {'; '.join(said)}")
    for key, mine in own.items():
        value, name = state[key], f"{field}.{key}"
        if not torch.is_tensor(value):
            raise CheckpointError(
                f"{where}: field {name!r} must be a tensor, got {type(value).__name__}"
            )
        if value.shape != mine.shape:
            raise CheckpointError(
                f"{where}: field {field!r} does not fit {network}: tensor {name!r} has shape "
                f"{tuple(value.shape)}, the network's {tuple(mine.shape)}"
            )
        if value.dtype != mine.dtype:
            raise CheckpointError(
                f"{where}: tensor {name!r} has dtype {value.dtype}, the network's {mine.dtype}"
            )
        problem = _non_finite(value)
        if problem:
            raise CheckpointError(f"{where}: tensor {name!r} {problem}")


_ADAM_STATE = ("exp_avg", "exp_avg_sq", "step")
"""What Adam (and AdamW) keep for each parameter; ``max_exp_avg_sq`` too with ``amsgrad``."""
_SQUARES = ("exp_avg_sq", "max_exp_avg_sq")
"""State of squared gradients' averages, which Adam's square root needs >= 0."""


def check_optimizer_state(
    optimizer: torch.optim.Optimizer, saved: Any, where: str, name: str
) -> None:
    """Raise :class:`CheckpointError` unless ``saved`` fits ``optimizer``: its parameter
    groups (as many, each of as many parameters, ``amsgrad`` alike) and each parameter's
    state (Adam's: exactly its moments, each of the parameter's shape, dtype and memory
    layout, finite, squares >= 0; a ``step`` a finite scalar >= 0).

    Why: ``optimizer.load_state_dict`` takes any tensor as a moment, and fused Adam then
    reads and writes as many numbers as the parameter holds, wherever the moment ends: a
    one-number moment made it write past its buffer, a million-number one trained with no
    error. Devices are not compared: ``torch.load``'s ``map_location`` puts all of a
    file's tensors on one device, and ``load_state_dict`` moves each to its parameter's.
    An optimizer other than Adam keeps state this does not know by name: there, every
    tensor of one or more dimensions must be shaped as its parameter.
    """
    what = f"{where}: optimizer {name!r}"
    if (
        not isinstance(saved, dict)
        or not isinstance(saved.get("state"), dict)
        or not isinstance(saved.get("param_groups"), list)
        or not all(isinstance(g, dict) for g in saved["param_groups"])
    ):
        raise CheckpointError(
            f"{what} must be a dict of 'state' and 'param_groups' (an optimizer's state_dict)"
        )
    groups = optimizer.param_groups
    if len(saved["param_groups"]) != len(groups):
        raise CheckpointError(
            f"{what} has {len(saved['param_groups'])} parameter groups, this learner's "
            f"{len(groups)}"
        )
    params: dict[int, tuple[torch.Tensor, dict]] = {}  # saved id: the parameter, its group
    for i, (group, mine) in enumerate(zip(saved["param_groups"], groups, strict=True)):
        ids = group.get("params")
        if (
            not isinstance(ids, list)
            or not all(type(k) is int for k in ids)
            or len(set(ids)) != len(ids)
            or any(k in params for k in ids)
        ):
            raise CheckpointError(f"{what} group {i} must list distinct integer parameter ids")
        if len(ids) != len(mine["params"]):
            raise CheckpointError(
                f"{what} group {i} lists {len(ids)} parameters, this learner's "
                f"{len(mine['params'])}"
            )
        # amsgrad adds a moment per parameter: a saved group must keep this one's
        if "amsgrad" in mine and group.get("amsgrad", False) is not mine["amsgrad"]:
            raise CheckpointError(
                f"{what} group {i} has amsgrad={str(group.get('amsgrad'))[:40]}, this "
                f"learner's {mine['amsgrad']}"
            )
        params.update((k, (p, mine)) for k, p in zip(ids, mine["params"], strict=True))
    is_adam = isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)
    for k, state in saved["state"].items():
        if type(k) is not int or k not in params:
            raise CheckpointError(
                f"{what} state {str(k)[:40]} belongs to no parameter of its groups"
            )
        param, group = params[k]
        if not isinstance(state, dict):
            raise CheckpointError(f"{what} state {k} must be a dict, got {type(state).__name__}")
        keys = sorted(str(key)[:40] for key in state)
        if not all(isinstance(key, str) for key in state):
            raise CheckpointError(f"{what} state {k} must be keyed by names, got {keys[:8]}")
        if is_adam:
            keeps = sorted(_ADAM_STATE + (("max_exp_avg_sq",) if group.get("amsgrad") else ()))
            if keys != keeps:
                raise CheckpointError(
                    f"{what} state {k} holds {keys[:8]}, where Adam keeps {keeps}"
                )
        for key, value in state.items():
            _check_param_state(value, param, key, f"{what} state {k}", is_adam)


def _check_param_state(value: Any, param: torch.Tensor, key: Any, what: str, is_adam: bool) -> None:
    """One entry of a parameter's optimizer state (see :func:`check_optimizer_state`)."""
    if key == "step":
        if not (
            torch.is_tensor(value)
            and value.dim() == 0
            and value.dtype != torch.bool
            and bool(torch.isfinite(value))
            and bool(value >= 0)
        ):
            shown = str(value)
            shown = shown if len(shown) <= 60 else shown[:60] + "..."
            raise CheckpointError(
                f"{what} 'step' must be a scalar tensor of a finite number >= 0, got {shown}"
            )
        return
    if not torch.is_tensor(value):
        if is_adam:
            raise CheckpointError(f"{what} {key!r} must be a tensor, got {type(value).__name__}")
        return  # another optimizer's own bookkeeping (a count, a flag)
    if not is_adam and value.dim() == 0:
        return  # another optimizer's scalar (a rate, a product): not one per weight
    if value.shape != param.shape:
        raise CheckpointError(
            f"{what} {key!r} has shape {tuple(value.shape)}, its parameter {tuple(param.shape)}"
        )
    if value.dtype != param.dtype:
        raise CheckpointError(
            f"{what} {key!r} has dtype {value.dtype}, its parameter {param.dtype}"
        )
    if param.is_contiguous() and not value.is_contiguous():
        # a fused kernel walks the moment's memory in its parameter's order
        raise CheckpointError(
            f"{what} {key!r} is not contiguous (strides {value.stride()}) as its parameter is"
        )
    problem = _non_finite(value)
    if problem:
        raise CheckpointError(f"{what} {key!r} {problem}")
    if key in _SQUARES and value.numel() and bool((value < 0).any()):
        raise CheckpointError(f"{what} {key!r} holds negative values (an average of squares)")


def _non_finite(t: torch.Tensor) -> str | None:
    """What makes a float tensor's values unusable, or ``None``."""
    if not t.is_floating_point() or not t.numel() or bool(torch.isfinite(t).all()):
        return None
    return "holds NaN values" if bool(torch.isnan(t).any()) else "holds infinite values"


def strip_replay_from_file(path: str | os.PathLike) -> bool:
    """Drop the replay buffer(s) from the checkpoint at ``path``, in place.

    An off-policy learner's checkpoint carries its whole replay (every fused learner's,
    too), which dwarfs its networks; a store that keeps many checkpoints needs the replay
    only in those a pod will resume from. The file is read safely (``weights_only``) and
    written back atomically at the same path, a local path or an fsspec URL as for
    :func:`save_checkpoint`. A pod loads the stripped file with an empty replay (see
    :meth:`elegantpod.pod.pod.Pod.load`).

    Returns
    -------
    bool
        Whether the file changed: ``False`` for a checkpoint with no replay (an
        on-policy learner's, or one already stripped), which is left untouched.

    Raises
    ------
    CheckpointError
        If the file is missing, corrupt or not an elegantpod checkpoint.
    """
    data = load_checkpoint(path)
    stripped = without_replay(data)
    if stripped is data:
        return False
    save_checkpoint(path, {k: v for k, v in stripped.items() if k not in ("format", "version")})
    return True


def without_replay(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` without its learner's replay buffer(s) (every fused learner's too).

    Pure: the dicts on the way to a replay are copied, the tensors are shared, and a
    payload with no replay is returned as it is (the same object).
    """
    from elegantpod.agents.fusion import strip

    learner = payload.get("learner")
    if not isinstance(learner, dict):
        return payload
    fused = learner.get("fused")
    parts = fused if isinstance(fused, list) else []
    if learner.get("replay") is None and not any(
        isinstance(x, dict) and x.get("replay") is not None for x in parts
    ):
        return payload  # nothing to drop (an empty "replay" entry stays as it is)
    return {**payload, "learner": strip(learner, "replay")}


def _unsafe(path, exc: UnsafeFileError) -> str:
    where = f"checkpoint {os.fspath(path)[:200]!r}"
    if exc.limit is not None:
        return f"{where} is {exc.size} bytes, over the limit of {exc.limit} bytes"
    name = "" if exc.name == os.fspath(path) else f": {exc.name[:200]}"
    return f"{where}{name} is {exc.kind}; only a regular file is loaded (refusing to follow it)"


def _reason(exc: Exception) -> str:
    """Why torch could not load a file, without torch's advice to retry with
    ``weights_only=False`` or to allowlist globals: that would run the file's code."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        if found:
            return (
                f"it holds a Python object ({found.group(1)}), not only tensors, numbers "
                "and strings; elegantpod never loads such files, since that runs code"
            )
        found = re.search(r"WeightsUnpickler error: \s*(.+)", text)
        return found.group(1).strip() if found else "not a weights-only torch file"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}"


def checkpoint_spec(path: str | Path) -> PodSpec:
    """The validated :class:`PodSpec` saved in a checkpoint (nothing is built)."""
    return spec_from_payload(load_checkpoint(path), path)


def spec_from_payload(data: dict[str, Any], path) -> PodSpec:
    """The checkpoint's spec, or a :class:`CheckpointError` naming the file and field."""
    if "spec" not in data:
        raise CheckpointError(f"checkpoint {str(path)!r} has no field 'spec'")
    try:
        return PodSpec.from_json(data["spec"])
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: field 'spec': {exc}") from None


def check_devices(spec: PodSpec, path) -> None:
    """Raise :class:`CheckpointError` when the checkpoint's devices are not on this machine."""
    named = [("device", spec.device)] + [("learner_devices", d) for d in spec.learner_devices]
    for name, device in named:
        if device == AUTO_DEVICE:  # decided by the pod that loads it: always here
            continue
        try:
            present = _is_present(torch.device(device))
        except (RuntimeError, TypeError):
            present = False
        if not present:
            raise CheckpointError(
                f"checkpoint {str(path)!r}: field 'spec.{name}' is {device!r}, which this "
                "machine lacks; pass device='auto' or 'cpu' (or another) to load it here"
            )


def _is_present(dev: torch.device) -> bool:
    if dev.type == "cuda":
        return torch.cuda.is_available() and (dev.index or 0) < torch.cuda.device_count()
    if dev.type == "mps":
        return torch.backends.mps.is_available()
    return True


def resolve_env_kwargs(spec: PodSpec, env_kwargs, path, allow_remote: bool) -> PodSpec:
    """The spec with the caller's env keywords in force; refuses a file or URL that only
    the checkpoint names (unless ``allow_remote``)."""
    from elegantpod.envs.registry import external_sources

    given = dict(env_kwargs or {})
    check_json("env_kwargs", given)
    kept = {k: v for k, v in spec.env_kwargs.items() if k not in given}
    kept_eval = {k: v for k, v in spec.eval_env_kwargs.items() if k not in given}
    if not allow_remote:
        from elegantpod.provenance import own_sources

        for field, kwargs in (("env_kwargs", kept), ("eval_env_kwargs", kept_eval)):
            named = external_sources(kwargs)
            own = own_sources(named, path)  # this user's checkpoint and data table
            for key, value in named.items():
                if key in own:
                    continue
                shown = repr(value) if len(repr(value)) <= 200 else repr(value)[:200] + "..."
                raise CheckpointError(
                    f"checkpoint {str(path)!r} names {shown} as spec.{field}.{key}: "
                    "elegantpod does not read a file or URL that a checkpoint names. Pass it "
                    f"yourself (Pod.from_checkpoint(path, env_kwargs={{{key!r}: ...}}), "
                    "backtest(..., data=...) or `elegantpod backtest --data`), or "
                    "allow_remote=True for a checkpoint you trust"
                )
    if not given:
        return spec
    return dataclasses.replace(spec, env_kwargs={**kept, **given}, eval_env_kwargs=kept_eval)


def checked_rng_state(
    state: Any, generator: torch.Generator, where: str, field: str
) -> torch.Tensor:
    """``state`` as a CPU byte tensor that ``generator``'s kind accepts (tried on a scratch
    generator), or a :class:`CheckpointError` naming the field."""
    try:
        state = state.cpu()
        torch.Generator(device=generator.device).set_state(state)
    except (RuntimeError, TypeError, AttributeError, ValueError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(
            f"{where}: field {field!r} is not a random-number-generator state ({reason})"
        ) from None
    return state


ORIGIN_FIELDS = ("tournament", "pod", "writer")
"""What a tournament's checkpoint says of where it comes from (its field ``origin``)."""
_ORIGIN_ID = re.compile(r"^[0-9a-f]{8,64}$")
_ORIGIN_POD = re.compile(r"^p[0-9]{3,9}$")


def origin_of(data: dict[str, Any], path) -> dict[str, str] | None:
    """The tournament, pod and writer (lease token) that saved a store checkpoint.

    ``None`` for a checkpoint saved outside a tournament, or by an elegantpod older than
    this field. A malformed ``origin`` is a :class:`CheckpointError`: it comes from a
    file, so it is checked like user input.
    """
    origin = data.get("origin")
    if origin is None:
        return None
    if (
        not isinstance(origin, dict)
        or set(origin) != set(ORIGIN_FIELDS)
        or not all(isinstance(origin[k], str) for k in ORIGIN_FIELDS)
        or not _ORIGIN_ID.match(origin["tournament"])
        or not _ORIGIN_POD.match(origin["pod"])
        or not _ORIGIN_ID.match(origin["writer"])
    ):
        shown = repr(origin)
        shown = shown if len(shown) <= 200 else shown[:200] + "..."
        raise CheckpointError(
            f"checkpoint {str(path)!r}: field 'origin' must be "
            f"{{'tournament': hex, 'pod': 'p...', 'writer': hex}}, got {shown}"
        )
    return dict(origin)


def check_origin(
    data: dict[str, Any],
    path,
    *,
    tournament: str | None,
    env_id: str,
    algo: str,
    pod: str | None = None,
) -> dict[str, str] | None:
    """Raise :class:`CheckpointError` unless a store's checkpoint is what its record says.

    A store can be tampered with: a leader's file swapped for another tournament's (a
    Pendulum SAC agent in a CartPole PPO store) must never be returned as the best agent
    nor trained on. The env and algorithm are checked for every checkpoint; the
    tournament and the pod for every one that names them (a checkpoint written before
    elegantpod recorded its origin names none; a store saved before it recorded its
    tournament's identity passes ``tournament=None``). Returns the origin.
    """
    spec = spec_from_payload(data, path)
    where = f"checkpoint {str(path)!r}"
    if spec.env_id != env_id or spec.algo != algo:
        raise CheckpointError(
            f"{where} holds a {spec.algo!r} agent for {spec.env_id!r}, but its record in "
            f"the store says {algo!r} for {env_id!r}: refusing a swapped checkpoint"
        )
    origin = origin_of(data, path)
    if origin is not None:
        if tournament is not None and origin["tournament"] != tournament:
            raise CheckpointError(
                f"{where} was written by tournament {origin['tournament']!r}, not by this "
                f"store's tournament {tournament!r}: refusing a checkpoint from elsewhere"
            )
        if pod is not None and origin["pod"] != pod:
            raise CheckpointError(
                f"{where} was written by pod {origin['pod']!r}, not by {pod!r}: refusing "
                "a swapped checkpoint"
            )
    return origin
