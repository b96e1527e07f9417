"""MuJoCo locomotion through the gymnasium adapter: rollouts, truncation, pods, workers."""

import dataclasses
import multiprocessing

import gymnasium
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco", reason="needs the mujoco extra: pip install -e '.[mujoco]'")

from elegantpod.agents import ALGOS  # noqa: E402
from elegantpod.config import PodSpec  # noqa: E402
from elegantpod.envs.gym import GymVecEnv
from elegantpod.envs.registry import make_env  # noqa: E402
from elegantpod.pod.pod import Pod  # noqa: E402

LOCOMOTION = ["Hopper-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5"]
CONTINUOUS_ALGOS = [
    name for name, cls in ALGOS.items() if gymnasium.spaces.Box in cls.supported_action_spaces()
]


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    """MuJoCo writes MUJOCO_LOG.TXT into the working directory on model warnings."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("env_id", LOCOMOTION)
def test_random_rollout_shapes_dtypes_and_autoreset(env_id):
    n = 3
    env = make_env(env_id, num_envs=n, seed=0)
    try:
        assert isinstance(env, GymVecEnv) and env.max_episode_steps == 1000
        obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
        assert env.observation_space.dtype == np.float32  # MuJoCo observes in float64
        assert env.action_space.dtype == np.float32
        obs = env.reset()
        assert obs.shape == (n, obs_dim) and obs.dtype == torch.float32
        low = torch.as_tensor(env.action_space.low)
        high = torch.as_tensor(env.action_space.high)
        gen = torch.Generator().manual_seed(0)
        lengths = torch.zeros(n, dtype=torch.int64)
        returns = torch.zeros(n, dtype=torch.float64)
        finished = 0
        for _ in range(150):
            action = low + torch.rand(n, act_dim, generator=gen) * (high - low)
            nxt, reward, term, trunc, info = env.step(action)
            assert nxt.shape == (n, obs_dim) and nxt.dtype == torch.float32
            assert reward.shape == (n,) and reward.dtype == torch.float32
            assert term.dtype == torch.bool and trunc.dtype == torch.bool
            assert info["final_obs"].shape == (n, obs_dim)
            assert all(t.device == env.device for t in (nxt, reward, term, info["final_obs"]))
            lengths += 1
            returns += reward.double()
            done = term | trunc
            # unfinished rows: final_obs is the next obs; finished rows: a fresh start
            torch.testing.assert_close(info["final_obs"][~done], nxt[~done])
            if done.any():
                assert not torch.equal(info["final_obs"][done], nxt[done])
                assert torch.equal(info["episode_length"][done], lengths[done])
                torch.testing.assert_close(
                    info["episode_return"][done].double(), returns[done], rtol=1e-5, atol=1e-4
                )
                finished += int(done.sum())
                lengths[done] = 0
                returns[done] = 0.0
        if env_id != "HalfCheetah-v5":  # the others fall over under random actions
            assert finished > 0
    finally:
        env.close()


def test_truncation_at_1000_steps_keeps_the_true_final_obs():
    """HalfCheetah never terminates: step 1000 truncates, and final_obs is what gymnasium's
    own single env shows there (so a learner bootstraps from the right state)."""
    env = make_env("HalfCheetah-v5", num_envs=1, seed=3)
    ref = gymnasium.make("HalfCheetah-v5")
    try:
        env.reset()
        ref.reset(seed=3)
        rng = np.random.default_rng(0)
        for t in range(1, 1001):
            a = rng.uniform(-1, 1, size=(1, 6)).astype(np.float32)
            obs, reward, term, trunc, info = env.step(torch.as_tensor(a))
            ref_obs, ref_reward, ref_term, ref_trunc, _ = ref.step(a[0])
            assert bool(trunc[0]) == ref_trunc == (t == 1000) and not term[0]
        expected = torch.as_tensor(ref_obs, dtype=torch.float32)
        torch.testing.assert_close(info["final_obs"][0], expected)
        assert not torch.allclose(obs[0], expected)  # obs is the next episode's start
        assert int(info["episode_length"][0]) == 1000
        assert float(reward[0]) == pytest.approx(ref_reward, rel=1e-6)
    finally:
        env.close()
        ref.close()


def test_learner_actions_reach_mujoco_within_the_box():
    """Humanoid's Box is [-0.4, 0.4]: the learner scales into it, the adapter passes it on."""
    from elegantpod.agents.sac import SAC

    env = make_env("Humanoid-v5", num_envs=2, seed=0)
    try:
        learner = SAC(env.observation_space, env.action_space, None, "cpu", 0)
        obs = env.reset()
        for _ in range(3):
            with torch.inference_mode():
                action = learner.act(obs, deterministic=False)
            assert bool((action.abs() <= 0.4 + 1e-6).all())
            obs, *_ = env.step(action)
            for i, sub in enumerate(env.vec.envs):
                np.testing.assert_allclose(sub.unwrapped.data.ctrl, action[i].numpy(), rtol=1e-6)
    finally:
        env.close()


def _small(algo: str, num_envs: int = 4):
    config = ALGOS[algo].config_cls()
    changes = {"num_envs": num_envs}
    if ALGOS[algo].is_on_policy:
        changes["horizon"] = 128
    return dataclasses.replace(config, **changes)


@pytest.mark.parametrize("algo", CONTINUOUS_ALGOS)
def test_pod_smoke_on_hopper(algo):
    # one evaluation episode at the end: an untrained Hopper may stand for up to 1000 steps
    spec = PodSpec(
        env_id="Hopper-v5",
        algo=algo,
        hparams=_small(algo),
        max_steps=2000,
        eval_every_steps=2000,
        eval_episodes=1,
    )
    pod = Pod(spec)
    try:
        result = pod.run()
    finally:
        pod.env.close()
        pod.evaluator.env.close()
    assert result.env_steps >= 2000
    assert np.isfinite(result.eval_return_mean)
    assert 1 <= pod.last_eval.lengths[0] <= 1000


def test_async_workers_feed_a_pod_and_shut_down():
    """Rollout workers in subprocesses (gymnasium's AsyncVectorEnv) train a pod; closing
    the env ends them. The evaluator keeps one in-process env."""
    before = set(multiprocessing.active_children())
    spec = PodSpec(
        env_id="Hopper-v5",
        algo="sac",
        hparams=_small("sac", num_envs=2),
        max_steps=1200,
        eval_every_steps=1200,
        eval_episodes=1,
        env_kwargs={"vectorization_mode": "async"},
        eval_env_kwargs={"vectorization_mode": "sync"},
    )
    pod = Pod(spec)
    try:
        assert isinstance(pod.env.vec, gymnasium.vector.AsyncVectorEnv)
        assert isinstance(pod.evaluator.env.vec, gymnasium.vector.SyncVectorEnv)
        workers = list(pod.env.vec.processes)
        assert len(workers) == 2 and all(p.is_alive() for p in workers)
        result = pod.run()
        assert result.env_steps >= 1200 and np.isfinite(result.eval_return_mean)
        assert "losses/critic" in result.curve[-1].stats
    finally:
        pod.env.close()
        pod.evaluator.env.close()
    for p in workers:
        p.join(timeout=10)
    assert not any(p.is_alive() for p in workers)
    assert set(multiprocessing.active_children()) <= before


def test_async_in_a_daemonic_process_explains_itself(monkeypatch):
    """Dask workers are daemonic by default and cannot start sub-env processes."""
    monkeypatch.setitem(multiprocessing.current_process()._config, "daemon", True)
    with pytest.raises(RuntimeError, match="distributed.worker.daemon"):
        make_env("Hopper-v5", num_envs=2, vectorization_mode="async")


def test_async_workers_started_by_forkserver():
    env = make_env(
        "Hopper-v5",
        num_envs=2,
        seed=0,
        vectorization_mode="async",
        vector_kwargs={"context": "forkserver"},
    )
    try:
        env.reset()
        obs, *_ = env.step(torch.zeros(2, 3))
        assert obs.shape == (2, 11)
    finally:
        env.close()
