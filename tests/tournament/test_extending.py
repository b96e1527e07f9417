"""Custom algorithms (register_algo) and custom mutation policies in real tournaments."""

from __future__ import annotations

import pytest

from elegantpod import Tournament
from elegantpod.agents import ALGOS, get_algo, register_algo
from elegantpod.agents.ppo import PPO
from elegantpod.cli.main import main as cli_main
from elegantpod.tournament.core.generator import GeneratorConfig, mutate

TINY = {"num_envs": 8, "horizon": 16}


def test_register_algo_rejects_what_cannot_work():
    with pytest.raises(ValueError, match="needs a Learner subclass"):
        register_algo(dict)
    with pytest.raises(ValueError, match="'ppo' is a built-in algorithm"):
        register_algo(type("MyPPO", (PPO,), {}), name="ppo")
    with pytest.raises(ValueError, match="mutation_policy must be a function, got 3"):
        Tournament("CartPole-v1", store="unused", mutation_policy=3)


@pytest.mark.slow
def test_custom_algorithm_defined_here_runs_on_the_workers(client, tmp_path, capsys):
    # Defined inside the test: the workers cannot import it, so the tournament must
    # ship it to them (by value) for their pods to find it by name.
    class HalfClipPPO(PPO):
        """PPO with half the default clipping: a stand-in for a user's own algorithm."""

        name = "halfclip"

        def __init__(self, observation_space, action_space, config, device="cpu", seed=0):
            super().__init__(observation_space, action_space, config, device, seed)
            self.clip_used = self.config.clip_coef / 2

    register_algo(HalfClipPPO)
    try:
        assert get_algo("HalfClip") is HalfClipPPO
        t = Tournament(
            "CartPole-v1",
            ["halfclip", "ppo"],
            pods=2,
            max_steps=20_000,
            segment_steps=4096,
            eval_episodes=2,
            hparams={"halfclip": TINY, "ppo": TINY},
            store=tmp_path / "s",
            client=client,
        )
        t.start()
        s = t.wait(timeout=180)
        assert s["status"] == "finished", s["error"]
        assert s["pods_failed"] == 0
        assert "halfclip" in set(t.pods["algo"])
        halfclip = t.pods[t.pods["algo"] == "halfclip"]
        assert (halfclip["segment"] >= 1).all()
        board = t.leaderboard
        checkpoint = board[board["algo"] == "halfclip"]["checkpoint"].iloc[0]
    finally:
        ALGOS.pop("halfclip", None)
    # From the shell, in a process that never saw the class: export and compare read a
    # store or checkpoint naming "halfclip" only with --import of the module defining it.
    store = str(tmp_path / "s")
    commands = {
        "export": ["export", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "p.onnx")],
        "compare": ["compare", "--method", "t", store, "--budget", "60", "--target", "100"],
    }
    try:
        for name, argv in commands.items():
            assert cli_main(argv) == 2, name
            err = capsys.readouterr().err
            assert "unknown algorithm 'halfclip'" in err and "--import MODULE" in err, err
            module = tmp_path / f"half_algos_{name}.py"  # a process imports a module once
            module.write_text(HALFCLIP_MODULE)
            assert cli_main([*argv, "--import", str(module)]) == 0, name
            capsys.readouterr()
            ALGOS.pop("halfclip", None)
    finally:
        ALGOS.pop("halfclip", None)
    assert (tmp_path / "p.onnx").stat().st_size > 0


HALFCLIP_MODULE = """
from elegantpod.agents import register_algo
from elegantpod.agents.ppo import PPO


@register_algo
class HalfClipPPO(PPO):
    name = "halfclip"
"""


@pytest.mark.slow
def test_mutation_policy_decides_every_child(client, tmp_path):
    def halve_lr(hparams, space, rng, config):
        """Always halve the learning rate, touch nothing else."""
        new = dict(hparams, lr=hparams["lr"] / 2)
        return new, {"lr": [hparams["lr"], new["lr"]]}

    t = Tournament(
        "CartPole-v1",
        ["ppo"],
        pods=3,
        max_steps=60_000,
        segment_steps=2048,
        eval_episodes=2,
        hparams={"ppo": TINY},
        # no evidence asked: every lagging pod gets a child, so the policy is exercised
        generator=GeneratorConfig(ready_segments=1, truncation=0.5, evidence_t=0.0),
        store=tmp_path / "s",
        client=client,
        mutation_policy=halve_lr,
    )
    t.start()
    s = t.wait(timeout=180)
    assert s["status"] == "finished", s["error"]
    lineage = t.lineage()  # a DataFrame, like t.pods
    assert list(lineage["pod"]) == list(t.pods["pod_id"])
    mutated = [e for e in lineage.to_dict("records") if e["mutation"]]
    assert len(mutated) >= 3  # two fresh explorers + at least one child
    for e in mutated:
        old, new = e["mutation"]["lr"]
        assert set(e["mutation"]) == {"lr"} and new == pytest.approx(old / 2)
    assert any(e["parent"] for e in mutated)


@pytest.mark.slow
def test_a_policy_returning_bad_values_fails_the_tournament_clearly(client, tmp_path):
    def broken(hparams, space, rng, config):
        new, mutation = mutate(hparams, space, rng, config)
        return dict(new, lr=-1.0), mutation

    t = Tournament(
        "CartPole-v1",
        ["ppo"],
        pods=2,
        max_steps=40_000,
        segment_steps=2048,
        eval_episodes=1,
        hparams={"ppo": TINY},
        store=tmp_path / "s",
        client=client,
        mutation_policy=broken,
    )
    with pytest.raises(ValueError, match="mutation_policy returned bad ppo hyperparameters"):
        t.start()  # the second fresh pod is already an explorer made by the policy


@pytest.mark.slow
def test_custom_env_defined_here_runs_on_the_workers(client, tmp_path):
    import gymnasium
    import numpy as np
    import torch

    from elegantpod.envs.base import TorchVecEnv
    from elegantpod.envs.classic import NATIVE_ENVS
    from elegantpod.envs.registry import CUSTOM_ENVS, register_env

    class Reach(TorchVecEnv):
        """Move a point on [-1, 1] to a goal: a user's own batched env."""

        state_dim = 2
        default_max_episode_steps = 30

        def __init__(
            self, num_envs=1, device="cpu", seed=None, max_episode_steps=None, compile=None
        ):
            super().__init__(num_envs, device, seed, max_episode_steps, compile)
            self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
            self.action_space = gymnasium.spaces.Discrete(3)

        def _sample_initial_state(self, n):
            return torch.rand(2, n, generator=self.generator, device=self.device) * 2 - 1

        @classmethod
        def dynamics(cls, state, action):
            pos = (state[0] + (action.reshape(-1).to(state.dtype) - 1) * 0.1).clamp(-1, 1)
            dist = (pos - state[1]).abs()
            return torch.stack((pos, state[1])), -dist, dist < 0.05

    with pytest.raises(ValueError, match="'CartPole-v1' is a built-in env"):
        register_env("CartPole-v1", Reach)
    with pytest.raises(ValueError, match="needs a TorchVecEnv subclass"):
        register_env("Reach-v0", dict)
    register_env("Reach-v0", Reach)
    try:
        t = Tournament(
            "Reach-v0",
            ["ppo"],
            pods=2,
            max_steps=20_000,
            segment_steps=4096,
            eval_episodes=4,
            hparams={"ppo": TINY},
            store=tmp_path / "s",
            client=client,
        )
        t.start()
        s = t.wait(timeout=180)
        assert s["status"] == "finished", s["error"]
        assert s["pods_failed"] == 0 and s["best_score"] is not None
        assert t.best().spec.env_id == "Reach-v0"
    finally:
        NATIVE_ENVS.pop("Reach-v0", None)
        CUSTOM_ENVS.pop("Reach-v0", None)


def test_a_slow_env_gets_segments_that_let_every_pod_be_scored_several_times(client, tmp_path):
    """Issue 59, item 4: PPO's default segment (32,768 steps) takes about 20 s on this
    env, longer than the budget; with no segment size named, segments are capped so
    each pod is scored several times within it."""
    import time

    import gymnasium
    import numpy as np
    import torch

    from elegantpod.envs.base import TorchVecEnv
    from elegantpod.envs.classic import NATIVE_ENVS
    from elegantpod.envs.registry import CUSTOM_ENVS, register_env

    class SlowReach(TorchVecEnv):
        """A point to move to 0, 5 ms a step: a slow simulator."""

        state_dim = 1
        default_max_episode_steps = 20

        def __init__(
            self, num_envs=1, device="cpu", seed=None, max_episode_steps=None, compile=False
        ):
            super().__init__(num_envs, device, seed, max_episode_steps, False)
            self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
            self.action_space = gymnasium.spaces.Discrete(3)

        def _sample_initial_state(self, n):
            return torch.rand(1, n, generator=self.generator, device=self.device) * 2 - 1

        @classmethod
        def dynamics(cls, state, action):
            time.sleep(0.005)
            pos = (state[0] + (action.reshape(-1).to(state.dtype) - 1) * 0.1).clamp(-1, 1)
            return pos[None], -pos.abs(), pos.abs() < 0.05

    register_env("SlowReach-v0", SlowReach)
    try:
        t = Tournament(
            "SlowReach-v0",
            ["ppo"],
            pods=2,
            max_seconds=12,
            eval_episodes=2,
            hparams={"ppo": TINY},
            store=tmp_path / "s",
            client=client,
        )
        t.start()
        s = t.wait(timeout=120)
        assert s["status"] == "finished", s["error"]
        scored = t.history().groupby("pod")["score"].count()
        assert len(scored) >= 2 and (scored >= 3).all(), scored.to_dict()
    finally:
        NATIVE_ENVS.pop("SlowReach-v0", None)
        CUSTOM_ENVS.pop("SlowReach-v0", None)
