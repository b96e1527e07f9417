"""The exploration trap, CI-sized: a tournament reaches what lone pods mostly miss.

``Ledge-v0`` is MountainCarContinuous' trap in miniature, cheap enough for CI: a point
starts at 0 and moves ``0.1 * a`` per step; every step costs ``0.1 * a**2`` and reaching
``x >= 1`` pays 10 and ends the episode (50 steps at most). Standing still (return 0) is
learned long before exploration noise carries the point to the ledge, and a pod that
has settled on standing still rarely finds it: whether a pod ever does depends on its
exploration noise (a hyperparameter) and on luck (its seed). (The real
MountainCarContinuous is in ``benchmarks/tournament_pays.py``: too slow for CI.)

Lone pods take the base hyperparameters (i.i.d. Gaussian exploration noise); the
tournament starts from the base and three pods explored around it (numeric settings
only: every starting pod keeps Gaussian noise), replaces pods only by a gap that matters
against the target (``GeneratorConfig.min_gap``) and beyond the noise of their scores,
and when no score improves for ``restart_after`` segments per pod it restarts the bottom
half with fresh draws from the search space: other noise kinds (OU, colored) and scales.
Budgets count env steps, and pods are seeded by index, so each outcome is fixed by the
seeds (here the lone pods all stay trapped and the founders too, until a restart).
"""

import gymnasium
import numpy as np
import pytest
import torch

from elegantpod import Tournament
from elegantpod.envs.base import TorchVecEnv
from elegantpod.envs.registry import register_env
from elegantpod.tournament.core.generator import GeneratorConfig

ENV, TARGET = "Ledge-v0", 8.0
BASE = {"num_envs": 16, "hidden": [32, 32], "exploration_noise": 0.2, "learning_starts": 256}
PER_POD = 16_000  # env steps each pod gets
SEED = 5  # on these seeds no lone pod finds the ledge, nor does any starting pod


class Ledge(TorchVecEnv):
    """A point on [-1, 1]; the ledge at 1 pays 10, every push costs 0.1 * a**2."""

    state_dim = 1
    default_max_episode_steps = 50

    def __init__(self, num_envs=1, device="cpu", seed=None, max_episode_steps=None, compile=None):
        super().__init__(num_envs, device, seed, max_episode_steps, compile)
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def _sample_initial_state(self, n):
        return torch.zeros(1, n, device=self.device)

    @classmethod
    def dynamics(cls, state, action):
        a = action.reshape(-1).to(state.dtype).clamp(-1.0, 1.0)
        x = (state[0] + 0.1 * a).clamp(-1.0, 1.0)
        done = x >= 1.0
        return x.unsqueeze(0), done.to(state.dtype) * 10.0 - 0.1 * a * a, done


def run(client, store, *, lone: bool, seed: int = SEED):
    register_env(ENV, Ledge)
    t = Tournament(
        ENV,
        algos=["td3"],
        pods=4,
        hparams={"td3": BASE},
        segment_steps=2_000,
        max_steps=4 * PER_POD,
        target_reward=None if lone else TARGET,
        eval_episodes=4,
        # restarts after 2 segments per pod without improvement (default 6): CI-sized
        generator=GeneratorConfig(ready_segments=10**9)
        if lone
        else GeneratorConfig(restart_after=2),
        store=store,
        client=client,
        seed=seed,
    )
    if lone:
        for _ in range(4):  # the base hyperparameters, four seeds
            t.add_pod("td3", **BASE)
    t.start()
    t.wait(300)
    assert t.status == "finished", t.summary()
    return t


@pytest.mark.slow
def test_a_tournament_escapes_the_trap_that_holds_most_lone_pods(client, tmp_path):
    lone = run(client, tmp_path / "lone", lone=True)
    best = lone.history().groupby("pod")["score"].max()
    assert len(best) == 4 and (best >= TARGET).sum() < 2, best.to_dict()
    t = run(client, tmp_path / "tournament", lone=False)
    s = t.summary()
    assert s["solved"] and s["best_score"] >= TARGET, (s, t.lineage())
    # the winner's schedule shows why: it began as a restart (a fresh draw from the
    # search space) or its noise kind changed on the way (every starting pod had Gaussian)
    schedule = t.schedule()
    restarted = any(ph["origin"].startswith("restart") for ph in schedule)
    switched = any("noise" in ph["changes"] for ph in schedule)
    assert restarted or switched, schedule
    assert s["restarts"] >= 1, s
