"""Policies to deploy (issue 34, item 3): a checkpoint's actor with its normalisation and
action scaling, no env; predict as SB3's; ONNX / torch.export files that compute what
torch computes; hostile checkpoint fields refused."""

import sys
import warnings

import gymnasium
import numpy as np
import pytest
import torch

from elegantpod import Pod, train
from elegantpod.pod.checkpoint import CheckpointError, checkpoint_bytes, load_checkpoint
from elegantpod.policy.policy import Policy


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two run folders trained a few hundred steps (weights need not be good): PPO on
    CartPole with observation normalisation, SAC on Pendulum."""
    root = tmp_path_factory.mktemp("policy")
    kw = {"eval_episodes": 1, "progress": False, "threads": 1}
    train("CartPole-v1", "ppo", max_steps=1024, num_envs=16, horizon=64, normalize_obs=True,
          out=root / "ppo", **kw)  # fmt: skip
    train("Pendulum-v1", "sac", max_steps=256, learning_starts=64, out=root / "sac", **kw)
    return {"ppo": root / "ppo", "sac": root / "sac"}


def _obs(policy, n=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *policy.obs_shape, generator=g) * 2


def test_predict_is_the_learners_action_with_normalisation_applied(runs):
    policy = Policy.load(runs["ppo"])
    obs = _obs(policy)
    action, state = policy.predict(obs)
    assert state is None and action.dtype == torch.int64 and action.shape == (7,)
    # the same actions as the pod that acts on the environment
    pod = Pod.from_checkpoint(runs["ppo"], device="cpu")
    assert torch.equal(action, pod.learner.act(obs))
    # and as computed by hand from the saved tensors: normalise, then the MLP's argmax
    modules = load_checkpoint(runs["ppo"] / "best.pt")["learner"]["modules"]
    norm, w = modules["obs_norm"], modules["actor"]
    assert norm["mean"].abs().sum() > 0  # statistics were learned: normalising matters
    x = ((obs - norm["mean"]) / torch.sqrt(norm["var"] + 1e-8)).clamp(-10, 10)
    x = torch.tanh(x @ w["0.weight"].T + w["0.bias"])
    x = torch.tanh(x @ w["2.weight"].T + w["2.bias"])
    assert torch.equal(action, (x @ w["4.weight"].T + w["4.bias"]).argmax(-1))
    # the pod hands out the same policy
    assert torch.equal(Policy.from_pod(pod).predict(obs)[0], action)


def test_single_or_batch_numpy_or_torch(runs):
    policy = Policy.load(runs["sac"])
    obs = _obs(policy)
    batch, _ = policy.predict(obs.numpy())
    assert isinstance(batch, np.ndarray) and batch.shape == (7, 1) and batch.dtype == np.float32
    one, _ = policy.predict(obs[3].numpy().astype(np.float64))
    assert isinstance(one, np.ndarray) and one.shape == (1,)
    np.testing.assert_array_equal(one, batch[3])
    t_one, _ = policy.predict(obs[3])
    assert torch.is_tensor(t_one) and t_one.shape == (1,)
    assert np.all(batch >= policy.low) and np.all(batch <= policy.high)
    # scaled from tanh's [-1, 1] to Pendulum's [-2, 2]
    pod = Pod.from_checkpoint(runs["sac"], device="cpu")
    assert torch.equal(policy.predict(obs)[0], pod.learner.act(obs))
    discrete = Policy.load(runs["ppo"])
    a, _ = discrete.predict([0.01, 0.0, -0.02, 0.0])
    assert isinstance(a, np.ndarray) and a.shape == () and a.dtype == np.int64


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_stochastic_predict_is_reproducible_with_a_generator(runs, algo):
    policy = Policy.load(runs[algo])
    obs = _obs(policy, n=256)
    a1, _ = policy.predict(obs, deterministic=False, generator=torch.Generator().manual_seed(1))
    a2, _ = policy.predict(obs, deterministic=False, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a1, a2) and not torch.equal(a1, policy.predict(obs)[0])
    if algo == "sac":
        assert (a1.abs() <= 2.0).all()


@pytest.mark.parametrize(
    ("obs", "message"),
    [
        (np.zeros(3), "observations must have shape (4,) (one) or (batch, 4)"),
        (np.zeros((2, 5)), "got (2, 5)"),
        (torch.zeros(2, 2, 4), "got (2, 2, 4)"),
        (np.array(["a", "b", "c", "d"]), "must be real numbers"),
        (torch.zeros(4, dtype=torch.bool), "must be real numbers"),
        (torch.zeros(2, 4, device="meta"), "on the meta device, which holds no values"),
        (torch.zeros(2, 4).to_sparse(), "a dense tensor of numbers, got layout torch.sparse_coo"),
        (
            torch.nested.nested_tensor([torch.zeros(4), torch.zeros(4)], layout=torch.jagged),
            "a dense tensor of numbers, got a nested tensor",
        ),
    ],
)
def test_bad_observations_are_named(runs, obs, message):
    with pytest.raises(ValueError, match=None) as info:
        Policy.load(runs["ppo"]).predict(obs)
    assert message in str(info.value)


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_onnx_runtime_computes_what_torch_computes(runs, algo, tmp_path):
    import onnxruntime

    policy = Policy.load(runs[algo])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the export warns of nothing
        path = policy.export(tmp_path / "policy.onnx")
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs"]
    for n in (1, 5, 64):  # the batch dimension is dynamic
        obs = _obs(policy, n=n, seed=n).numpy()
        got = session.run(["action"], {"obs": obs})[0]
        want, _ = policy.predict(obs)
        if algo == "ppo":
            np.testing.assert_array_equal(got, want)  # argmax actions, int64
        else:
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_torch_export_and_torchscript_load_back_to_the_same_actions(runs, tmp_path):
    sac, ppo = Policy.load(runs["sac"]), Policy.load(runs["ppo"])
    obs = _obs(sac, n=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program = torch.export.load(sac.export(tmp_path / "p.pt2"))
    assert torch.equal(program.module()(obs), sac.predict(obs)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit's own notice
        scripted = torch.jit.load(ppo.export(tmp_path / "p.ts"))
    obs = _obs(ppo, n=9)
    assert torch.equal(scripted(obs), ppo.predict(obs)[0])


@pytest.mark.parametrize(
    ("name", "format", "message"),
    [
        ("p.zip", None, "cannot tell the export format of"),
        ("p.onnx", "pt", "unknown export format 'pt'"),
        ("p.onnx", "export", "format 'export' and the file name"),
    ],
)
def test_bad_export_requests_are_named(runs, tmp_path, name, format, message):
    with pytest.raises(ValueError) as info:
        Policy.load(runs["sac"]).export(tmp_path / name, format=format)
    assert message in str(info.value)
    assert list(tmp_path.iterdir()) == []


def _hostile(data, change):
    data = {**data, "learner": {**data["learner"], "modules": dict(data["learner"]["modules"])}}
    data["spaces"] = dict(data["spaces"])
    change(data)
    return data


def _set_space(key, value):
    return lambda d: d["spaces"].__setitem__(key, value)


def _set_module(name, key, value):
    def change(d):
        d["learner"]["modules"][name] = {**d["learner"]["modules"][name], key: value}

    return change


@pytest.mark.parametrize(
    ("algo", "change", "named"),
    [
        ("ppo", lambda d: d.pop("spaces"), "has no field 'spaces'"),
        ("ppo", _set_space("observation_shape", [4, 4]), "'spaces.observation_shape' must be"),
        ("ppo", _set_space("observation_shape", [5]), "does not fit the network"),
        ("ppo", _set_space("action_n", -1), "'spaces.action_n' must be an integer"),
        ("ppo", _set_space("action_n", 3), "field 'learner.modules.actor' does not fit"),
        ("sac", _set_space("action_low", torch.tensor([float("nan")])), "'spaces.action_low'"),
        ("sac", _set_space("action_high", torch.tensor([float("inf")])), "must be finite"),
        ("sac", _set_space("action_low", torch.tensor([3.0])), "low <= high"),
        ("sac", _set_space("action_n", 2), "sac cannot handle action space Discrete(2)"),
        ("ppo", _set_module("actor", "0.weight", torch.zeros(3, 3)), "does not fit the network"),
        (
            "ppo",
            _set_module("actor", "0.bias", torch.full((64,), float("nan"))),
            "holds NaN values",
        ),
        ("ppo", _set_module("actor", "evil", torch.zeros(1)), "does not fit the network"),
        ("ppo", _set_module("obs_norm", "var", -torch.ones(4)), "negative variance"),
        ("ppo", lambda d: d["learner"].pop("modules"), "'learner.modules' is missing"),
    ],
)
def test_hostile_checkpoint_fields_are_refused(runs, tmp_path, algo, change, named):
    data = load_checkpoint(runs[algo] / "best.pt")
    payload = {k: v for k, v in _hostile(data, change).items() if k not in ("format", "version")}
    path = tmp_path / "evil.pt"
    path.write_bytes(checkpoint_bytes(payload))
    with pytest.raises(CheckpointError) as info:
        Policy.load(path)
    assert named in str(info.value) and "evil.pt" in str(info.value)


def test_cli_export_writes_an_onnx_file(runs, tmp_path, capsys, monkeypatch):
    import onnxruntime

    from elegantpod.cli.main import main

    monkeypatch.setattr(sys, "path", list(sys.path))  # main() drops the working folder
    out = tmp_path / "cartpole.onnx"
    status = main(
        ["export", "--checkpoint", str(runs["ppo"]), "--format", "onnx", "--out", str(out)]
    )
    assert status == 0, capsys.readouterr().err
    assert str(out) in capsys.readouterr().out
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    obs = _obs(Policy.load(runs["ppo"]), n=3).numpy()
    np.testing.assert_array_equal(
        session.run(None, {"obs": obs})[0], Policy.load(runs["ppo"]).predict(obs)[0]
    )


# -- the env's own observations (Discrete, Tuple, Dict), flattened as training did --------
class _DictWalk(gymnasium.Env):
    """A short walk that observes a Dict: a Discrete position and a Box velocity."""

    observation_space = gymnasium.spaces.Dict(
        {"pos": gymnasium.spaces.Discrete(5), "vel": gymnasium.spaces.Box(-1, 1, (2,))}
    )
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = 2, 0
        return self._obs(), {}

    def _obs(self):
        return {"pos": self.pos, "vel": np.array([self.pos / 4, -self.pos / 4], np.float32)}

    def step(self, action):
        self.pos = int(np.clip(self.pos + (1 if action else -1), 0, 4))
        self.t += 1
        return self._obs(), float(self.pos == 4), self.pos == 4, self.t >= 20, {}


@pytest.fixture(scope="module")
def own_spaces(tmp_path_factory):
    """PPO trained a few hundred steps on a Discrete (FrozenLake), a Tuple (Blackjack)
    and a Dict (a registered walk) observation space: their run folders."""
    gymnasium.register("DictWalk-v0", entry_point=_DictWalk)
    root = tmp_path_factory.mktemp("own")
    kw = {"eval_episodes": 1, "progress": False, "threads": 1, "num_envs": 4, "horizon": 32}
    out = {}
    for env_id in ("FrozenLake-v1", "Blackjack-v1", "DictWalk-v0"):
        train(env_id, "ppo", max_steps=256, out=root / env_id, **kw)
        out[env_id] = root / env_id
    yield out
    gymnasium.registry.pop("DictWalk-v0", None)


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Blackjack-v1", "DictWalk-v0"])
def test_predict_takes_the_envs_own_observations_one_or_a_batch(own_spaces, env_id, tmp_path):
    import onnxruntime

    policy = Policy.load(own_spaces[env_id])
    space = gymnasium.make(env_id).observation_space
    assert type(policy.env_observation_space) is type(space)
    assert gymnasium.spaces.flatdim(space) == policy.obs_shape[0]
    space.seed(3)
    for _ in range(5):  # one observation, as the env returns it
        o = space.sample()
        flat = gymnasium.spaces.flatten(space, o).astype(np.float32)
        assert policy.predict(o)[0] == policy.predict(flat)[0]
    vec = gymnasium.make_vec(env_id, num_envs=6, vectorization_mode="sync")
    batch, _ = vec.reset(seed=1)  # a batch, as a vector env returns it
    rows = np.stack(
        [
            gymnasium.spaces.flatten(space, o)
            for o in gymnasium.vector.utils.iterate(vec.observation_space, batch)
        ]  # fmt: skip
    ).astype(np.float32)
    actions, _ = policy.predict(batch)
    assert actions.shape == (6,)
    np.testing.assert_array_equal(actions, policy.predict(rows)[0])
    # the deployed graph takes the flattened rows: gymnasium's flatten is the pre-step
    session = onnxruntime.InferenceSession(
        policy.export(tmp_path / "p.onnx"), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_array_equal(session.run(["action"], {"obs": rows})[0], actions)


def test_an_own_observation_the_space_does_not_hold_is_named(own_spaces):
    lake, walk = Policy.load(own_spaces["FrozenLake-v1"]), Policy.load(own_spaces["DictWalk-v0"])
    with pytest.raises(ValueError, match="observation 16 is not a state of Discrete"):
        lake.predict(16)
    with pytest.raises(ValueError, match=r"the env's own, Dict\('pos'.*keys \['pos', 'speed'\]"):
        walk.predict({"pos": 1, "speed": np.zeros(2)})
    with pytest.raises(ValueError, match="observation 7 is not a state of Discrete"):
        walk.predict({"pos": np.array([1, 7]), "vel": np.zeros((2, 2))})


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"kind": "Evil"}, "kind must be Discrete"),
        ({"kind": "Discrete", "n": 15, "start": 0}, "flattens to 15 values"),
        ({"kind": "Discrete", "n": -1}, "a Discrete needs"),
        (
            {"kind": "Dict", "keys": ["a", "a"], "spaces": [{"kind": "Discrete", "n": 8}] * 2},
            "one distinct string key",
        ),  # fmt: skip
        ("deep", "nested deeper than"),
    ],
)
def test_hostile_observation_space_records_are_refused(own_spaces, tmp_path, change, named):
    if change == "deep":
        change = {"kind": "Discrete", "n": 16}
        for _ in range(12):
            change = {"kind": "Tuple", "spaces": [change]}
    data = load_checkpoint(own_spaces["FrozenLake-v1"] / "best.pt")
    data = _hostile(data, _set_space("observation_space", change))
    payload = {k: v for k, v in data.items() if k not in ("format", "version")}
    path = tmp_path / "evil.pt"
    path.write_bytes(checkpoint_bytes(payload))
    with pytest.raises(CheckpointError, match=named) as info:
        Policy.load(path)
    assert "evil.pt" in str(info.value) and "spaces.observation_space" in str(info.value)
