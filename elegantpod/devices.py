"""Device names: their form, and which concrete torch device one names on this machine.

A spec may say ``"auto"`` and travel to a Dask worker with a GPU: the name is checked for
its form where the spec is written (:func:`check_device_name`) and resolved where the
pod is built (:func:`resolve_device`). torch is imported only when a name is checked.
"""

from __future__ import annotations

from typing import Any

AUTO_DEVICE = "auto"
"""The device name that stands for "the GPU where there is one, else the CPU"."""
CUDA_BUILD_HINT = (
    "install a CUDA build of torch, e.g. "
    "`pip install torch --index-url https://download.pytorch.org/whl/cu126`"
)


DEVICE_TYPES = ("cpu", "cuda", "mps")
"""The torch device types a pod runs on."""
MAX_DEVICE_INDEX = 63
"""Largest device index accepted (no machine has more GPUs)."""


def check_device_name(device: Any) -> None:
    """Raise ``ValueError`` naming ``device`` unless it is ``"auto"`` or a torch device
    string (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``...). The form only: whether this
    machine has the device is :func:`resolve_device`'s question."""
    if device == AUTO_DEVICE:
        return
    if not isinstance(device, str) or not device:
        raise ValueError(f"device must be a non-empty string, got {device!r}")
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        dev = None
    index = device.partition(":")[2]  # torch wraps large ones: "cuda:300" is cuda:44
    if index and not (index.isdigit() and int(index) <= MAX_DEVICE_INDEX):
        dev = None
    # a pod runs on these only: "meta" has no memory, and other backends no kernels
    if dev is None or dev.type not in DEVICE_TYPES or not 0 <= (dev.index or 0) <= MAX_DEVICE_INDEX:
        raise ValueError(
            f"unknown device {str(device)[:100]!r}: use 'auto', 'cpu', 'cuda', 'cuda:N' "
            f"(N < {MAX_DEVICE_INDEX + 1}) or 'mps'"
        ) from None


def resolve_device(device: Any) -> str:
    """The concrete torch device that ``device`` names on this machine.

    ``"auto"`` becomes ``"cuda"`` where torch sees a CUDA device, else ``"cpu"``. Any other
    name is returned in torch's spelling once this machine is known to have it.

    Raises
    ------
    ValueError
        For a malformed name, or a device this machine or this torch build lacks (a CUDA
        device on a CPU-only build of torch: with how to install a CUDA build).
    """
    import torch

    if isinstance(device, torch.device):
        device = str(device)
    if device == AUTO_DEVICE:
        return "cuda" if torch.cuda.is_available() else "cpu"
    check_device_name(device)
    dev = torch.device(device)
    if dev.type == "cuda":
        if torch.version.cuda is None:
            raise ValueError(
                f"device {device!r}: CUDA is not available in this torch build "
                f"(torch {torch.__version__} is CPU-only); {CUDA_BUILD_HINT}, or use "
                "device 'auto' or 'cpu'"
            )
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(
                f"device {device!r}: torch {torch.__version__} was built with CUDA "
                f"{torch.version.cuda} but sees no CUDA device (no GPU or driver, or "
                "CUDA_VISIBLE_DEVICES hides them); use device 'auto' or 'cpu'"
            )
        if (dev.index or 0) >= count:
            raise ValueError(
                f"device {device!r}: this machine has {count} CUDA device(s), "
                f"cuda:0 to cuda:{count - 1}"
            )
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(
                f"device {device!r}: MPS (Apple GPU) is not available here; "
                "use device 'auto' or 'cpu'"
            )
    return str(dev)


def available_bytes(device: Any) -> int | None:
    """Free memory of ``device`` now (``None`` where it cannot be asked).

    ``"auto"`` gives ``None``: the device is decided where the pod is built, and the pod
    checks its memory there, with the concrete device, before it allocates anything.
    """
    import torch

    if device == AUTO_DEVICE:
        return None
    dev = torch.device(device)
    if dev.type == "cpu":
        return host_available_bytes()
    if dev.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(dev)[0])
    return None


def host_available_bytes() -> int:
    """Memory this process may still allocate on the host: the least of the machine's
    available memory, the container's (cgroup v2 ``memory.max`` less
    ``memory.current``, or v1's limit less usage) and the address-space ``ulimit -v``
    less what the process maps now.

    Why: a pod in a container limited to 2 GiB on a 64 GiB machine, or under ``ulimit
    -v``, was checked against the machine's 64 GiB, then killed by the OOM killer (or
    failed with a raw allocator error) instead of refused with its sizes.
    """
    import resource

    import psutil

    limits = [int(psutil.virtual_memory().available)]
    cgroup = _cgroup_room()
    if cgroup is not None:
        limits.append(cgroup)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(max(0, soft - psutil.Process().memory_info().vms))
    return max(0, min(limits))


def _cgroup_room(root: str = "/sys/fs/cgroup") -> int | None:
    """Bytes left under this process's cgroup memory limit, or ``None`` (no limit, or
    no cgroup file to read)."""
    from pathlib import Path

    def number(path: Path) -> int | None:
        try:
            text = path.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None  # "max": no limit

    base = Path(root)
    try:  # cgroup v2: this process's group, from /proc/self/cgroup ("0::/path")
        line = Path("/proc/self/cgroup").read_text().splitlines()[0]
        group = base / line.split("::", 1)[1].lstrip("/") if "::" in line else base
    except (OSError, IndexError):
        group = base
    for folder in (group, base):
        limit, used = number(folder / "memory.max"), number(folder / "memory.current")
        if limit is not None and used is not None:
            return max(0, limit - used)
    limit = number(base / "memory" / "memory.limit_in_bytes")  # cgroup v1
    used = number(base / "memory" / "memory.usage_in_bytes")
    if limit is not None and used is not None and limit < 2**60:  # v1's "no limit" is huge
        return max(0, limit - used)
    return None
