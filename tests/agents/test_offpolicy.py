"""What the replay-based learners (TD3, DDPG, DQN) share: replay accounting, checkpoints,
live hyperparameters, wrong-space errors and the ``train()`` entry point."""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import elegantpod
from elegantpod.agents import get_algo
from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod
from elegantpod.types import Batch

OFF_POLICY = [("td3", "Pendulum-v1"), ("ddpg", "Pendulum-v1"), ("dqn", "CartPole-v1")]
WRONG_SPACE = [
    ("dqn", "Pendulum-v1", gym.spaces.Box(-2.0, 2.0, (1,), np.float32), "Box"),
    ("td3", "CartPole-v1", gym.spaces.Discrete(2), "Discrete"),
    ("ddpg", "CartPole-v1", gym.spaces.Discrete(2), "Discrete"),
]


def _spaces(algo):
    obs = gym.spaces.Box(-1, 1, (3,), np.float32)
    if algo == "dqn":
        return obs, gym.spaces.Discrete(3)
    return obs, gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def _rollout(learner, T=4, N=6):
    obs = torch.randn(T, N, 3)
    action = torch.stack([learner.random_action(N) for _ in range(T)])
    zeros = torch.zeros(T, N, dtype=torch.bool)
    return Batch(obs, action, torch.randn(T, N), torch.randn(T, N, 3), zeros, zeros)


@pytest.mark.parametrize("algo", ["td3", "ddpg", "dqn"])
def test_replay_ratio_counts_gradient_steps_across_rollouts(algo):
    cls = get_algo(algo)
    learner = cls(*_spaces(algo), cls.config_cls(learning_starts=48, replay_ratio=0.25))
    # 24 transitions per rollout: the first only fills the warm-up, then 6 steps each.
    assert learner.take(_rollout(learner)) == 0 and learner.is_warming_up
    assert learner.take(_rollout(learner)) == 6 and not learner.is_warming_up
    learner.set_hparams(replay_ratio=0.1)  # 2.4 steps per rollout: fractions carry over
    assert [learner.take(_rollout(learner)) for _ in range(5)] == [2, 2, 3, 2, 3]
    assert learner.seen == len(learner.replay) == 7 * 24


@pytest.mark.parametrize(("algo", "env"), OFF_POLICY)
def test_checkpoint_round_trip_through_pod(algo, env, tmp_path):
    hparams = get_algo(algo).config_cls(learning_starts=256, batch_size=32, hidden=(16, 16))
    spec = PodSpec(env_id=env, algo=algo, hparams=hparams, seed=3, max_steps=1024, eval_episodes=2)
    pod = Pod(spec, out_dir=tmp_path)
    result = pod.run()
    back = Pod.from_checkpoint(result.checkpoint)
    a, b = pod.learner, back.learner
    assert back.env_steps == pod.env_steps == 1024
    assert (b.seen, b.gradient_steps, len(b.replay)) == (a.seen, a.gradient_steps, len(a.replay))
    assert a.gradient_steps > 0
    obs = torch.randn(64, a.obs_shape[0])
    assert torch.equal(a.act(obs), b.act(obs))
    for name, opt in a.optimizers.items():
        mine, theirs = opt.state_dict()["state"], b.optimizers[name].state_dict()["state"]
        assert mine.keys() == theirs.keys() and mine
        for k in mine:
            for key, value in mine[k].items():
                assert torch.equal(value, theirs[k][key]), (name, k, key)
    # Replay, RNG streams and step clocks came back too: the same rollout teaches both
    # learners exactly the same thing.
    rng = a.generator.get_state()
    batch = pod.collector.rollout()  # exploring draws from a's generator: rewind it
    a.generator.set_state(rng)
    a.update(batch)
    b.update(batch)
    for name, module in a.modules.items():
        for (key, x), y in zip(
            module.state_dict().items(), b.modules[name].state_dict().values(), strict=True
        ):
            assert torch.equal(x, y), (name, key)


@pytest.mark.parametrize("algo", ["td3", "ddpg", "dqn"])
def test_set_hparams_reaches_every_optimizer_and_guards_shapes(algo):
    cls = get_algo(algo)
    learner = cls(*_spaces(algo))
    learner.set_hparams(lr="2e-4", gamma=0.95)
    assert learner.config.gamma == 0.95
    lrs = [g["lr"] for opt in learner.optimizers.values() for g in opt.param_groups]
    assert len(lrs) == len(learner.optimizers) >= 1 and set(lrs) == {2e-4}
    for key, value in (("hidden", (8,)), ("buffer_size", 10)):
        with pytest.raises(ValueError, match=key):
            learner.set_hparams(**{key: value})
    with pytest.raises(ValueError, match="tau must be in"):
        learner.set_hparams(tau=1.5)
    assert learner.config.tau == cls.config_cls().tau


@pytest.mark.parametrize(("algo", "env", "space", "kind"), WRONG_SPACE)
def test_a_wrong_action_space_is_one_clear_error_before_any_work(algo, env, space, kind, tmp_path):
    message = f"{algo} cannot handle action space {kind}"
    obs = gym.spaces.Box(-1, 1, (3,), np.float32)
    with pytest.raises(ValueError, match=message):
        get_algo(algo)(obs, space)
    with pytest.raises(ValueError, match=message):
        elegantpod.train(env, algo, out=tmp_path / "api")
    assert not (tmp_path / "api").exists()
    p = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", "train", "--env", env, "--algo", algo]
        + ["--out", str(tmp_path / "cli"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert p.returncode == 2
    lines = [line for line in p.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("elegantpod: error:"), p.stderr
    assert message in lines[0]
    assert not (tmp_path / "cli").exists()


@pytest.mark.parametrize(("algo", "env"), OFF_POLICY)
def test_train_runs_each_algorithm(algo, env):
    result = elegantpod.train(
        env, algo, max_steps=768, eval_episodes=2, learning_starts=256, hidden=(16, 16)
    )
    assert result.algo == algo and result.env_steps == 768
    assert np.isfinite(result.eval_return_mean)
    stats = result.curve[-1].stats
    assert stats and all(np.isfinite(v) for v in stats.values())
