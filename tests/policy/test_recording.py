"""Watching an agent (issue 34, item 4): deterministic episodes rendered through
gymnasium's ``rgb_array`` twin into a video that decodes with the expected frames."""

import base64

import imageio.v2 as imageio
import pytest

from elegantpod import Pod, PodSpec
from elegantpod.policy.policy import Policy
from elegantpod.policy.recording import check_mujoco_gl, record


@pytest.fixture(scope="module")
def pod():
    """An untrained CartPole pod: its policy need not be good to be filmed."""
    with Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=1, device="cpu")) as p:
        yield p


def test_a_video_has_one_frame_per_step_plus_each_reset(pod, tmp_path, monkeypatch):
    monkeypatch.setenv("ELEGANTPOD_WORKDIR", str(tmp_path / "work"))
    video = Policy.from_pod(pod).record(
        episodes=2, max_steps=15, path=tmp_path / "cartpole.mp4", fps=25
    )
    assert video.path == str(tmp_path / "cartpole.mp4") and video.fps == 25
    assert all(1 <= n <= 15 for n in video.steps) and len(video.returns) == 2
    assert video.frames == sum(n + 1 for n in video.steps)
    with imageio.get_reader(video.path, format="FFMPEG") as reader:
        decoded = [frame for frame in reader]
    assert len(decoded) == video.frames
    assert decoded[0].shape == (400, 600, 3)  # gymnasium's CartPole picture
    # it shows inline in Jupyter: the very file, base64 in a <video>
    html = video._repr_html_()
    assert html.startswith("<video controls") and "data:video/mp4;base64," in html
    assert (
        base64.b64decode(html.split("base64,")[1].split('"')[0])
        == (tmp_path / "cartpole.mp4").read_bytes()
    )
    assert video.save(tmp_path / "copy.mp4") == str(tmp_path / "copy.mp4")
    # the policy decides: the same deterministic episodes again
    again = Policy.from_pod(pod).record(episodes=2, max_steps=15)  # under workdir("videos")
    assert again.path.startswith(str(tmp_path / "work" / "videos"))
    assert again.steps == video.steps and again.returns == video.returns


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"episodes": 0}, "episodes must be an integer in 1..100"),
        ({"max_steps": 10**9}, "max_steps must be an integer in 1..100000"),
        ({"fps": -1}, "fps must be a number in (0, 240]"),
        ({"env_id": "StockTrading-v0"}, "has no gymnasium env to render it"),
        ({"env_id": "Pendulum-v1"}, "observes shape (3,), but the policy takes (4,)"),
    ],
)
def test_bad_requests_are_named(pod, kwargs, message):
    kwargs = {"env_id": "CartPole-v1", **kwargs}
    with pytest.raises(ValueError) as info:
        record(Policy.from_pod(pod), **kwargs)
    assert message in str(info.value)


def test_mujoco_without_headless_gl_says_what_to_install(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    with pytest.raises(ValueError) as info:
        check_mujoco_gl("Hopper-v5")
    assert "apt install libegl1" in str(info.value) and "MUJOCO_GL=egl" in str(info.value)
    monkeypatch.setenv("MUJOCO_GL", "egl")
    assert check_mujoco_gl("Hopper-v5")  # chosen: left to MuJoCo
    assert not check_mujoco_gl("CartPole-v1")  # not MuJoCo: nothing to check


def test_the_gif_writer_of_machines_without_ffmpeg_keeps_every_frame(tmp_path):
    import numpy as np

    from elegantpod.policy.recording import _writer

    path = str(tmp_path / "v.gif")
    writer = _writer(path, 30.0)
    for i in range(5):
        writer.append_data(np.full((40, 60, 3), 40 * i, np.uint8))
    writer.close()
    assert imageio.mimread(path)[4].shape[:2] == (40, 60) and len(imageio.mimread(path)) == 5
