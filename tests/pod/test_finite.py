"""A pod whose losses or state go non-finite fails, naming why, and saves nothing
(issue 56): a user's env emitting NaN or huge observations must not end in a run that
reports success with checkpoints the loader refuses."""

import math
import re

import gymnasium
import numpy as np
import pytest
import torch

from elegantpod.agents.dqn import DQNConfig
from elegantpod.agents.ppo import PPOConfig
from elegantpod.config import PodSpec
from elegantpod.envs.user_gym import as_env_id
from elegantpod.pod.checkpoint import CHECKPOINT_FILE
from elegantpod.pod.finite import NonFiniteError
from elegantpod.pod.pod import Pod


class NanObs(gymnasium.Env):
    """Ten-step episodes whose observations after the first are NaN: a broken user env."""

    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)
    bad = float("nan")

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.bad, 1.0], np.float32), 1.0, self.t >= 10, False, {}


class HugeObs(NanObs):
    """Finite observations of 3e38: squared or summed in a network, they overflow."""

    bad = 3e38


PPO = PPOConfig(num_envs=4, horizon=32, minibatch_size=64, epochs=1)
DQN = DQNConfig(num_envs=4, learning_starts=64, batch_size=32, buffer_size=4096)


def spec(env, algo, hp, **kw):
    kw = {"max_steps": 1024, "eval_every_steps": 512, "eval_episodes": 2, **kw}
    return PodSpec(env_id=as_env_id(env), algo=algo, hparams=hp, **kw)


@pytest.mark.parametrize(
    "env, algo, hp, why",
    [
        (NanObs, "ppo", PPO, "observations are NaN or infinite"),
        (NanObs, "dqn", DQN, "observations are NaN or infinite"),
        (HugeObs, "dqn", DQN, "observations are huge"),
    ],
)
@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_a_pod_whose_env_poisons_its_training_fails_and_writes_nothing(
    env, algo, hp, why, tmp_path
):
    pod = Pod(spec(env, algo, hp), out_dir=tmp_path)
    with pytest.raises(NonFiniteError) as caught:
        pod.run()
    text = str(caught.value)
    # the first line is the reason, the same for every pod of this env: a tournament
    # counts pods failing alike by it
    assert text.splitlines()[0].startswith(f"training went non-finite: the env's {why}"), text
    assert f"pod: {algo} on {pod.spec.env_id} (seed 0), env step" in text, text
    assert re.search(r"non-finite: (losses|charts)/\w+ = (nan|-?inf)", text), text
    # no checkpoint: the failure came before the first evaluation's save
    assert not (tmp_path / CHECKPOINT_FILE).exists()


@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_a_non_finite_state_is_never_saved(tmp_path):
    """Off-policy warm-up: no gradient step yet, so no loss to see, but the replay holds
    NaN observations; the save that would write them (which the loader refuses) fails."""
    pod = Pod(spec(NanObs, "dqn", DQNConfig(num_envs=4, learning_starts=4096), max_steps=64))
    pod.run()  # warm-up only: no update, no loss
    with pytest.raises(NonFiniteError, match=r"learner\.replay\.(next_)?obs"):
        pod.save(tmp_path / "a.pt")
    assert not (tmp_path / "a.pt").exists()


def test_a_run_that_writes_no_checkpoint_checks_its_weights_at_its_end():
    """A replay learner warming up makes no update, so no loss shows the NaN weight: the
    end of the run does (a run with an output folder: its save)."""
    hp = DQNConfig(num_envs=4, learning_starts=4096)
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="dqn", hparams=hp, max_steps=64))
    weight = next(next(iter(pod.learner.modules.values())).parameters())
    with torch.no_grad():
        weight.view(-1)[0] = math.nan
    with pytest.raises(NonFiniteError, match=r"(?s)diverged.*non-finite: learner\.modules\."):
        pod.run()
