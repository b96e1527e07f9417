import dataclasses
from pathlib import Path

import pytest
import torch

from elegantpod.agents import PPOConfig, SACConfig
from elegantpod.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from elegantpod.config import PodSpec
from elegantpod.pod import Pod


def _trained_pod(tmp_path, algo="ppo", env="CartPole-v1", **hp):
    cfg = (PPOConfig if algo == "ppo" else SACConfig)(**hp)
    spec = PodSpec(
        env_id=env, algo=algo, seed=3, hparams=cfg, max_steps=4096, eval_every_steps=4096
    )
    pod = Pod(spec, out_dir=tmp_path)
    pod.run()
    return pod


@pytest.mark.parametrize(
    ("algo", "env", "hp"),
    [
        ("ppo", "CartPole-v1", {"num_envs": 8, "horizon": 64}),
        ("ppo", "Pendulum-v1", {"num_envs": 8, "horizon": 64, "normalize_obs": True}),
        ("sac", "Pendulum-v1", {"learning_starts": 512}),
    ],
)
def test_round_trip_gives_identical_next_actions(tmp_path, algo, env, hp):
    pod = _trained_pod(tmp_path, algo, env, **hp)
    obs = torch.randn(32, pod.learner.obs_shape[0])
    pod.save()
    expected_det = pod.learner.act(obs, deterministic=True)
    expected_sto = pod.learner.explore(obs)[0]
    restored = Pod.from_checkpoint(tmp_path / "checkpoint.pt")
    assert restored.env_steps == pod.env_steps == 4096
    torch.testing.assert_close(restored.learner.act(obs, deterministic=True), expected_det)
    torch.testing.assert_close(restored.learner.explore(obs)[0], expected_sto)
    for k, o in pod.learner.optimizers.items():
        s1, s2 = o.state_dict()["state"], restored.learner.optimizers[k].state_dict()["state"]
        for key in s1:
            for name in s1[key]:
                torch.testing.assert_close(s1[key][name], s2[key][name])


def test_resumed_pod_continues_from_its_step_count(tmp_path):
    pod = _trained_pod(tmp_path, num_envs=8, horizon=64)
    spec = dataclasses.replace(pod.spec, max_steps=8192)
    resumed = Pod(spec, out_dir=tmp_path, resume=True)
    assert resumed.env_steps == 4096
    result = resumed.run()
    assert result.env_steps == 8192
    assert load_checkpoint(tmp_path / "checkpoint.pt")["env_steps"] == 8192


def test_corrupt_or_foreign_files_give_clear_errors(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"definitely not a zip archive")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(bad)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not an elegantpod checkpoint"):
        load_checkpoint(foreign)
    good = _trained_pod(tmp_path / "good", num_envs=8, horizon=64).checkpoint_path
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(Path(good).read_bytes()[:500])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(truncated)


def test_weights_only_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"format": "elegantpod-checkpoint", "version": 1, "x": Evil()}, path)
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


def test_other_architecture_is_a_clear_error(tmp_path):
    pod = _trained_pod(tmp_path, num_envs=8, horizon=64, hidden=(32, 32))
    other = Pod(dataclasses.replace(pod.spec, hparams=PPOConfig(num_envs=8, horizon=64)))
    with pytest.raises(
        CheckpointError, match=r"does not fit this ppo network \(hidden=\(64, 64\)\)"
    ):
        other.load(tmp_path / "checkpoint.pt")
    sac = Pod(PodSpec(env_id="Pendulum-v1", algo="sac"))
    with pytest.raises(CheckpointError, match="holds a 'ppo' agent for 'CartPole-v1'"):
        sac.load(tmp_path / "checkpoint.pt")


def test_atomic_save_leaves_old_file_intact_on_failure(tmp_path):
    path = tmp_path / "ck.pt"
    save_checkpoint(path, {"a": torch.ones(3)})
    before = path.read_bytes()

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        save_checkpoint(path, {"a": Unpicklable()})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]  # no temp files left behind
