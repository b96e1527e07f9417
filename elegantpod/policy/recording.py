"""Watch an agent: deterministic episodes rendered to a video that shows inline in Jupyter.

Frames come from gymnasium's ``render_mode="rgb_array"``: a native classic env renders
through its gymnasium twin of the same id, which it matches step for step, so the policy
acts on the very observations it was trained on. MuJoCo renders headless through EGL or
OSMesa (``MUJOCO_GL``), which must be chosen before MuJoCo is imported; see
:func:`check_mujoco_gl`.

An episode of ``n`` steps gives ``n + 1`` frames: the reset's, then one after each step.
Videos are mp4 (H.264 through ``imageio-ffmpeg``), or a GIF where ``imageio-ffmpeg`` is
not installed (``pip install 'elegantpod[video]'``); frames are streamed to the encoder,
never all held in memory, and the file is written atomically.
"""

from __future__ import annotations

import base64
import html
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elegantpod.safe_files import atomic_write_bytes
from elegantpod.workspace import workdir

MAX_EPISODES = 100
MAX_FRAMES = 100_000
"""Most frames one video holds (about an hour at 30 frames a second)."""
MAX_INLINE_BYTES = 64 * 2**20
"""Largest video shown inline (base64 in the notebook); larger ones show their path."""


@dataclass(frozen=True)
class Video:
    """A recorded video: its file, frame count and episodes; shows itself in Jupyter."""

    path: str
    """The video file (``.mp4``, or ``.gif`` without ``imageio-ffmpeg``)."""
    frames: int
    """Frames in the file: ``steps + 1`` per episode (its reset frame, then each step's)."""
    fps: float
    returns: tuple[float, ...]
    """Each episode's return."""
    steps: tuple[int, ...]
    """Each episode's step count."""

    @property
    def mime(self) -> str:
        """The file's media type: ``video/mp4`` or ``image/gif``."""
        return "image/gif" if self.path.endswith(".gif") else "video/mp4"

    def save(self, path: str | os.PathLike) -> str:
        """Copy the video to ``path`` (atomically); returns it. The suffix should match
        :attr:`path`'s (``.mp4`` or ``.gif``)."""
        atomic_write_bytes(path, Path(self.path).read_bytes())
        return os.fspath(path)

    def _repr_html_(self) -> str:
        size = os.path.getsize(self.path)
        if size > MAX_INLINE_BYTES:
            return f"<p>video of {size:,} bytes: {html.escape(self.path)}</p>"
        data = base64.b64encode(Path(self.path).read_bytes()).decode("ascii")
        src = f"data:{self.mime};base64,{data}"
        if self.mime == "image/gif":
            return f'<img src="{src}" alt="{html.escape(self.path)}"/>'
        return f'<video controls autoplay loop muted playsinline src="{src}"></video>'


def record(
    policy,
    env_id: str,
    *,
    episodes: int = 1,
    max_steps: int | None = None,
    seed: int = 0,
    path: str | os.PathLike | None = None,
    fps: float | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> Video:
    """Record deterministic episodes of ``policy`` on ``env_id``.

    Parameters
    ----------
    policy
        Anything with SB3's ``predict(obs, deterministic=True) -> (action, state)`` and
        an ``obs_shape``: a :class:`~elegantpod.policy.policy.Policy`.
    env_id
        A gymnasium id; a native classic env's id renders through its gymnasium twin.
    episodes
        Episodes, one after the other in one video, reset with ``seed``, ``seed + 1``...
    max_steps
        Steps per episode at most; ``None``: the env's own time limit.
    path
        Where to write the video (``.mp4``; ``.gif`` without ``imageio-ffmpeg``);
        ``None``: a new file under :func:`elegantpod.workdir` ``("videos")``.
    fps
        Frames per second; ``None``: the env's ``render_fps`` (else 30).
    env_kwargs
        Keywords of ``gymnasium.make``.

    Raises
    ------
    ValueError
        For a bad count, an env that cannot render (naming what to install for MuJoCo),
        or one whose observations do not fit the policy.
    """
    import gymnasium

    episodes = _count("episodes", episodes, MAX_EPISODES)
    if max_steps is not None:
        max_steps = _count("max_steps", max_steps, MAX_FRAMES)
    if fps is not None and (
        isinstance(fps, bool) or not isinstance(fps, int | float) or not 0 < fps <= 240
    ):
        raise ValueError(f"fps must be a number in (0, 240], got {fps!r}")
    if env_id not in gymnasium.registry:
        raise ValueError(
            f"{str(env_id)[:200]!r} has no gymnasium env to render it; a video needs a "
            "gymnasium id (the native classic envs render through their twins of the same id)"
        )
    is_mujoco = check_mujoco_gl(env_id)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # gymnasium's classic envs draw with pygame; without a display SDL's default
        # video driver prints an "error:" line about XDG_RUNTIME_DIR (harmless, alarming)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    try:
        env = gymnasium.make(env_id, render_mode="rgb_array", **(env_kwargs or {}))
    except gymnasium.error.DependencyNotInstalled as exc:
        raise ValueError(f"cannot render {env_id!r}: {exc}") from None
    except Exception as exc:
        if not is_mujoco:
            raise
        # an unusable MUJOCO_GL fails in `import mujoco` (PyOpenGL finds no library)
        gl = os.environ.get("MUJOCO_GL", "")[:20]
        raise ValueError(
            f"cannot render {env_id!r} with MUJOCO_GL={gl!r} ({type(exc).__name__}): {GL_ADVICE}"
        ) from exc
    try:
        shape = tuple(env.observation_space.shape or ())
        if shape != tuple(policy.obs_shape):
            raise ValueError(
                f"{env_id!r} observes shape {shape}, but the policy takes {tuple(policy.obs_shape)}"
            )
        fps = fps or float(env.metadata.get("render_fps") or 30)
        return _encode(env, policy, episodes, max_steps, seed, fps, path)
    finally:
        env.close()


GL_ADVICE = (
    "install EGL (apt install libegl1; a GPU's driver ships it) or OSMesa (apt install "
    "libosmesa6), then start Python with MUJOCO_GL=egl (or osmesa) in its environment, "
    "before anything imports mujoco"
)
"""What a machine without a display needs to render MuJoCo."""


def check_mujoco_gl(env_id: str) -> bool:
    """Whether ``env_id`` is a MuJoCo env; raise ``ValueError`` saying what to install
    when it is and no headless OpenGL is chosen (MuJoCo reads ``MUJOCO_GL`` once, when
    imported, so it cannot be set from here)."""
    import gymnasium

    entry = str(getattr(gymnasium.registry.get(env_id), "entry_point", ""))
    is_mujoco = "envs.mujoco" in entry
    gl = os.environ.get("MUJOCO_GL", "").lower()
    if is_mujoco and not os.environ.get("DISPLAY") and gl not in ("egl", "osmesa"):
        raise ValueError(
            f"rendering {env_id!r} without a display needs headless OpenGL: {GL_ADVICE}"
        )
    return is_mujoco


def _count(name: str, value, limit: int) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or not 1 <= value <= limit
    ):
        raise ValueError(f"{name} must be an integer in 1..{limit}, got {value!r}")
    return int(value)


def _writer(path: str, fps: float):
    """An imageio writer for ``path`` (mp4 through ffmpeg, or GIF)."""
    import imageio.v2 as imageio

    if path.endswith(".gif"):
        return imageio.get_writer(path, mode="I", duration=1000.0 / fps, loop=0)
    # frames are cropped to even sizes (H.264's 4:2:0), so ffmpeg never resizes them
    return imageio.get_writer(path, format="FFMPEG", fps=fps, macro_block_size=1)


def _has_ffmpeg() -> bool:
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return False
    return True


def _encode(env, policy, episodes, max_steps, seed, fps, path) -> Video:
    suffix = ".mp4" if _has_ffmpeg() else ".gif"
    # under workdir("videos"), as every file an example writes: not a fresh temp file
    folder = workdir("videos", fresh=False)
    fd, tmp = tempfile.mkstemp(suffix=suffix, prefix="video-", dir=folder)
    os.close(fd)
    returns, steps, frames = [], [], 0
    writer = _writer(tmp, fps)
    try:

        def add(frame) -> None:
            nonlocal frames
            frame = np.asarray(frame)
            h, w = frame.shape[0] // 2 * 2, frame.shape[1] // 2 * 2
            writer.append_data(np.ascontiguousarray(frame[:h, :w, :3]))
            frames += 1

        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            add(env.render())
            total, n, done = 0.0, 0, False
            while not done and (max_steps is None or n < max_steps) and frames < MAX_FRAMES:
                action, _ = policy.predict(obs, deterministic=True)
                obs, reward, terminated, truncated, _ = env.step(action)
                add(env.render())
                total, n, done = total + float(reward), n + 1, terminated or truncated
            returns.append(total)
            steps.append(n)
    except BaseException:
        writer.close()
        os.unlink(tmp)
        raise
    writer.close()
    if path is not None:
        atomic_write_bytes(path, Path(tmp).read_bytes())
        os.unlink(tmp)
        tmp = os.fspath(path)
    return Video(tmp, frames, float(fps), tuple(returns), tuple(steps))
