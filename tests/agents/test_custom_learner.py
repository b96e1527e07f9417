"""A learner written outside the package, on the protocol alone (issue 43, item 3): it
trains, runs in a tournament, becomes a Policy, exports to ONNX and is recorded, with no
edit to elegantpod. Nothing here subclasses a built-in algorithm."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from elegantpod.agents import ALGOS, register_algo
from elegantpod.agents.base import DeployedActor, Learner


@dataclasses.dataclass(frozen=True, kw_only=True)
class ActorCriticConfig:
    """The actor-critic's settings."""

    num_envs: int = 16
    horizon: int = 32
    lr: float = 1e-3
    gamma: float = 0.99
    hidden: tuple[int, ...] = (64,)

    def validate(self) -> None:
        if len(self.hidden) != 1 or not self.hidden[0] > 0:
            raise ValueError(f"hidden must be one layer width > 0, got {self.hidden!r}")
        for name in ("num_envs", "horizon", "lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma!r}")


def _net(n_in: int, n_out: int, hidden: tuple[int, ...], generator) -> nn.Sequential:
    (width,) = hidden
    net = nn.Sequential(nn.Linear(n_in, width), nn.Tanh(), nn.Linear(width, n_out))
    with torch.no_grad():
        for p in net.parameters():  # from the learner's own generator: reproducible
            p.copy_(torch.randn(p.shape, generator=generator) / max(p.shape[-1], 1) ** 0.5)
    return net


class ActorCriticActor(DeployedActor):
    """The deployed policy: the logits' argmax; samples from the softmax."""

    reads = ("pi",)

    def __init__(self, observation_space, action_space, config: ActorCriticConfig):
        super().__init__(action_space)
        g = torch.Generator().manual_seed(0)  # overwritten by the saved weights
        self.pi = _net(observation_space.shape[0], action_space.n, config.hidden, g)

    def forward(self, obs):
        return self.pi(obs).argmax(-1)

    def sample(self, obs, generator=None):
        probs = torch.softmax(self.pi(obs), -1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class ActorCritic(Learner):
    """Advantage actor-critic (GAE advantages), one gradient step a rollout."""

    name = "mini_a2c"
    config_cls = ActorCriticConfig
    is_on_policy = True
    structural_hparams = ("num_envs", "horizon", "hidden")

    @classmethod
    def supported_action_spaces(cls):
        import gymnasium

        return (gymnasium.spaces.Discrete,)

    @classmethod
    def deployed(cls, observation_space, action_space, config):
        return ActorCriticActor(observation_space, action_space, config)

    def __init__(self, observation_space, action_space, config=None, device="cpu", seed=0):
        super().__init__(observation_space, action_space, config, device, seed)
        c, g = self.config, torch.Generator().manual_seed(int(seed))
        n_obs, n_act = observation_space.shape[0], int(action_space.n)
        self.pi = _net(n_obs, n_act, c.hidden, g).to(self.device)
        self.v = _net(n_obs, 1, c.hidden, g).to(self.device)
        self.modules = {"pi": self.pi, "v": self.v}
        params = [*self.pi.parameters(), *self.v.parameters()]
        self.optimizers = {"ac": torch.optim.Adam(params, lr=c.lr)}

    def explore(self, obs):
        probs = torch.softmax(self.pi(obs), -1)
        action = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
        return action, action

    def act(self, obs, deterministic=True):
        return self.pi(obs).argmax(-1) if deterministic else self.explore(obs)[1]

    def update(self, batch):
        c = self.config
        T, N = batch.reward.shape
        value = self.v(batch.obs).squeeze(-1)  # (T, N)
        with torch.no_grad():  # GAE(0.95) over the rollout, bootstrapped at its end
            next_value = self.v(batch.next_obs).squeeze(-1) * (~batch.terminated).float()
            delta = batch.reward + c.gamma * next_value - value
            advantage = torch.zeros_like(delta)
            running = torch.zeros(N)
            for t in reversed(range(T)):
                running = delta[t] + c.gamma * 0.95 * (~batch.done[t]).float() * running
                advantage[t] = running
            ret = advantage + value
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        logp = torch.log_softmax(self.pi(batch.obs), -1)
        taken = logp.gather(-1, batch.action.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1).mean()
        loss = -(taken * advantage).mean() + 0.5 * (value - ret).square().mean()
        loss = loss - 0.01 * entropy
        opt = self.optimizers["ac"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_([*self.pi.parameters(), *self.v.parameters()], 0.5)
        opt.step()
        return {"losses/total": loss.item(), "losses/entropy": entropy.item()}


@pytest.fixture
def registered():
    register_algo(ActorCritic)
    yield ActorCritic
    ALGOS.pop(ActorCritic.name, None)


@pytest.mark.slow
def test_a_learner_written_here_trains_tours_deploys_exports_and_records(
    registered, client, tmp_path
):
    """Measured on a 2-vCPU Xeon: an evaluation of 333 on CartPole at 45k env steps, in
    under a second (seed 0; a random policy scores about 22)."""
    import onnxruntime

    import elegantpod
    from elegantpod.policy.policy import Policy

    result = elegantpod.train(
        "CartPole-v1", "mini_a2c", seed=0, max_steps=60_000, eval_episodes=10,
        target_reward=195, out=tmp_path / "run", progress=False,
    )  # fmt: skip
    assert result.best_eval_return_mean >= 150, result.curve

    policy = Policy.load(tmp_path / "run")
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    actions, _ = policy.predict(obs)
    assert actions.dtype == np.int64 and set(actions) <= {0, 1}
    sampled, _ = policy.predict(obs, deterministic=False, generator=torch.Generator())
    assert sampled.shape == (16,)
    path = policy.export(tmp_path / "policy.onnx")
    (onnx_actions,) = onnxruntime.InferenceSession(str(path)).run(None, {"obs": obs})
    np.testing.assert_array_equal(onnx_actions, actions)
    video = policy.record(episodes=1, max_steps=50, path=tmp_path / "watch.gif")
    assert video.frames >= 2

    t = elegantpod.Tournament(
        "CartPole-v1", ["mini_a2c"], pods=2, max_steps=16_384, segment_steps=4096,
        eval_episodes=2, store=tmp_path / "s", client=client,
    )  # fmt: skip
    summary = t.start().wait(timeout=180)
    assert summary["pods_failed"] == 0 and summary["status"] == "finished", summary["error"]
    best = Policy.from_pod(t.best())
    assert best.algo == "mini_a2c" and best.predict(obs)[0].shape == (16,)


def test_a_learner_without_a_deployed_actor_says_so(tmp_path):
    """A learner that does not define ``deployed`` still trains; its Policy is refused
    with what to add, not a switch on algorithm names deep inside."""
    import elegantpod
    from elegantpod.pod.checkpoint import CheckpointError
    from elegantpod.policy.policy import Policy

    class Undeployable(ActorCritic):
        name = "undeployable"

        @classmethod
        def deployed(cls, observation_space, action_space, config):
            return Learner.deployed.__func__(cls, observation_space, action_space, config)

    register_algo(Undeployable)
    try:
        elegantpod.train("CartPole-v1", "undeployable", max_steps=1024, eval_episodes=1,
                         out=tmp_path / "run", progress=False)  # fmt: skip
        with pytest.raises(CheckpointError, match="undeployable has no actor to deploy: give"):
            Policy.load(tmp_path / "run")
    finally:
        ALGOS.pop("undeployable", None)


# -- names (issue 56, minor items) --------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "ppo ",  # a trailing space: another key than "ppo" that prints like it
        " mini",
        "mini\u200b",  # a zero-width space
        "\u0440po",  # a Cyrillic "р"
        "ｍｉｎｉ",  # fullwidth letters
        "a\nb",
        "a\x00b",
        "ppo,sac",  # --algos ppo,sac would split it
        "ppo.lr",  # --set ppo.lr=... would split it
        "my-algo",
        "1st",
        "_private",
        "x" * 33,
    ],
)
def test_register_algo_refuses_a_name_that_is_not_plain_ascii(name):
    """An algorithm's name reaches store entries, ``--set algo.key=value`` options, file
    names and HTML: a look-alike or a separator in it is refused, shown escaped."""
    before = dict(ALGOS)
    for cls, given in ((type("Named", (ActorCritic,), {"name": name}), None), (ActorCritic, name)):
        with pytest.raises(ValueError) as err:
            register_algo(cls, given)
        message = str(err.value)
        assert ascii(name)[:40] in message and "[a-z][a-z0-9_]" in message, message
        assert message.isascii() and "\n" not in message  # what it shows is visible
        assert before == ALGOS
    assert ActorCritic.name == "mini_a2c"


def test_register_algo_takes_plain_names_in_lower_case():
    Named = type("Named", (ActorCritic,), {"name": "Mini_A2C_2"})
    try:
        assert register_algo(Named) is Named
        assert Named.name == "mini_a2c_2" and ALGOS["mini_a2c_2"] is Named
        assert register_algo(Named, "x" * 32).name == "x" * 32
    finally:
        ALGOS.pop("mini_a2c_2", None)
        ALGOS.pop("x" * 32, None)
