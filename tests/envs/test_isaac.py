"""The Isaac Gym adapter, checked against our own native envs behind VecTask's convention."""

import sys
import warnings

import gymnasium
import numpy as np
import pytest
import torch

from elegantpod.envs.classic import CartPole, Pendulum
from elegantpod.envs.isaac import IsaacVecEnv, make_isaac_env

N = 6
STEPS = 300


def _global_generator(device: torch.device) -> torch.Generator:
    if device.type == "cuda":
        return torch.cuda.default_generators[device.index or 0]
    return torch.default_generator


class NativeVecTask:
    """One of our native envs exposed through IsaacGymEnvs' ``VecTask`` calling convention.

    Laid out as ``VecTask`` and its tasks (Cartpole, Ant) are: buffers start with
    ``reset_buf = 1``; ``reset()`` only returns the observation buffer; ``step`` clips the
    normalized actions, applies them (``pre_physics_step``), advances the physics (here the
    native env's ``dynamics``), then ``post_physics_step`` counts progress, restarts the
    sub-envs flagged in the *previous* step (``reset_idx``), computes observations, reward
    and ``reset_buf``; ``time_outs`` flag finished episodes that reached the time limit.
    Reset noise comes from torch's global RNG, as in Isaac Gym tasks.

    The task takes actions in ``[-1, 1]`` and scales them itself (Pendulum: to torques in
    ``[-2, 2]``; CartPole: push left or right); ``declared_bounds`` sets the Box it
    declares (``VecTask`` declares ``[-1, 1]``).
    """

    def __init__(
        self,
        native_cls,
        num_envs,
        max_episode_length,
        device="cpu",
        declared_bounds=(-1.0, 1.0),
        obs_in_reset_idx=False,
    ):
        # dynamics (eager), observe, initial-state sampling
        self.env = native_cls(num_envs=num_envs, device=device, compile=False)
        self.env.generator = _global_generator(self.env.device)
        self.num_envs = num_envs
        self.num_obs = self.env.observation_space.shape[0]
        self.num_actions = 1
        self.device = self.rl_device = str(self.env.device)
        self.max_episode_length = max_episode_length
        self.clip_actions, self.clip_obs = 1.0, np.inf
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (self.num_obs,))
        self.action_space = gymnasium.spaces.Box(*declared_bounds, (self.num_actions,))
        self.obs_in_reset_idx = obs_in_reset_idx
        dev = self.env.device
        self.obs_buf = torch.zeros(num_envs, self.num_obs, device=dev)
        self.rew_buf = torch.zeros(num_envs, device=dev)
        self.reset_buf = torch.ones(num_envs, dtype=torch.long, device=dev)
        self.timeout_buf = torch.zeros(num_envs, dtype=torch.long, device=dev)
        self.progress_buf = torch.zeros(num_envs, dtype=torch.long, device=dev)
        self.extras, self.obs_dict = {}, {}
        self.state = torch.zeros(self.env.state_dim, num_envs, device=dev)

    def native_action(self, actions):
        """How the task turns a normalized action into the native env's action."""
        if isinstance(self.env, Pendulum):
            return actions * Pendulum.max_torque
        return (actions[:, 0] > 0).long()

    def pre_physics_step(self, actions):
        self.actions = actions.clone()

    def simulate(self):
        self.state, self._reward, self._terminated = self.env.dynamics(
            self.state, self.native_action(self.actions)
        )

    def post_physics_step(self):
        self.progress_buf += 1
        env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)
        if len(env_ids) > 0:
            self.reset_idx(env_ids)
        self.compute_observations()
        self.compute_reward()

    def compute_observations(self):
        self.obs_buf[:] = self.env._observe(self.state)

    def compute_reward(self):
        self.rew_buf[:] = self._reward
        ended = self._terminated | (self.progress_buf >= self.max_episode_length - 1)
        self.reset_buf[:] = torch.where(ended, torch.ones_like(self.reset_buf), self.reset_buf)

    def reset_idx(self, env_ids):
        self.state[:, env_ids] = self.env._sample_initial_state(len(env_ids))
        if self.obs_in_reset_idx:
            self.obs_buf[env_ids] = self.env._observe(self.state[:, env_ids])
        self.reset_buf[env_ids] = 0
        self.progress_buf[env_ids] = 0

    def step(self, actions):
        self.pre_physics_step(torch.clamp(actions, -self.clip_actions, self.clip_actions))
        self.simulate()
        self.post_physics_step()
        self.timeout_buf = (self.progress_buf >= self.max_episode_length - 1) & (
            self.reset_buf != 0
        )
        self.extras["time_outs"] = self.timeout_buf.to(self.rl_device)
        self.obs_dict["obs"] = torch.clamp(self.obs_buf, -self.clip_obs, self.clip_obs)
        return self.obs_dict, self.rew_buf, self.reset_buf, self.extras

    def reset(self):
        self.obs_dict["obs"] = torch.clamp(self.obs_buf, -self.clip_obs, self.clip_obs)
        return self.obs_dict


class NoComputeObservations(NativeVecTask):
    """A task with no ``compute_observations`` method: its ``reset_idx`` writes ``obs_buf``."""

    def __getattribute__(self, name):
        if name == "compute_observations":
            raise AttributeError(name)
        return super().__getattribute__(name)

    def post_physics_step(self):
        self.progress_buf += 1
        env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)
        if len(env_ids) > 0:
            self.reset_idx(env_ids)
        NativeVecTask.compute_observations(self)
        self.compute_reward()


CASES = {
    "cartpole": dict(native_cls=CartPole, max_episode_length=25),
    "pendulum": dict(native_cls=Pendulum, max_episode_length=41),
    "pendulum-declared-torque-bounds": dict(
        native_cls=Pendulum, max_episode_length=41, declared_bounds=(-2.0, 2.0)
    ),
    "cartpole-obs-in-reset-idx": dict(
        native_cls=CartPole, max_episode_length=25, obs_in_reset_idx=True, no_compute=True
    ),
}


def _devices():
    cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
    return ["cpu", pytest.param("cuda", marks=[cuda, pytest.mark.gpu])]


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("case", list(CASES))
def test_adapter_reproduces_the_native_env_exactly(case, device):
    """Same seed and actions: obs, rewards, flags, final_obs and episode stats all equal."""
    kw = dict(CASES[case])
    native_cls, length = kw.pop("native_cls"), kw.pop("max_episode_length")
    task_cls = NoComputeObservations if kw.pop("no_compute", False) else NativeVecTask
    seed = 11
    # eager dynamics on both sides: compiled kernels (the CUDA default) round differently
    native = native_cls(
        num_envs=N, device=device, seed=seed, max_episode_steps=length - 1, compile=False
    )
    native._sparse_reset = True  # draw reset noise only for finished rows, as reset_idx does
    with torch.random.fork_rng(devices=[0] if device == "cuda" else []):
        task = task_cls(native_cls, N, length, device=device, **kw)
        env = IsaacVecEnv(task, recompute_obs=task_cls is NativeVecTask)
        low = torch.as_tensor(env.action_space.low, device=device)
        high = torch.as_tensor(env.action_space.high, device=device)
        gen = torch.Generator(device=device).manual_seed(0)
        torch.testing.assert_close(env.reset(seed=seed), native.reset(), rtol=0, atol=0)
        counts = {"terminated": 0, "truncated": 0}
        for _ in range(STEPS):
            u = torch.rand(N, 1, generator=gen, device=device) * (high - low) + low
            o_a, r_a, term_a, trunc_a, info_a = env.step(u)
            o_n, r_n, term_n, trunc_n, info_n = native.step(task.native_action(u / high))
            for a, b in [
                (o_a, o_n),
                (r_a, r_n),
                (trunc_a, trunc_n),
                # time_outs cannot tell "terminated in the last allowed step" apart
                (term_a, term_n & ~trunc_n),
                (info_a["final_obs"], info_n["final_obs"]),
                (info_a["episode_return"], info_n["episode_return"]),
                (info_a["episode_length"], info_n["episode_length"]),
            ]:
                assert a.device == torch.device(b.device) and a.dtype == b.dtype
                torch.testing.assert_close(a, b, rtol=0, atol=0)
            counts["terminated"] += int(term_a.sum())
            counts["truncated"] += int(trunc_a.sum())
    episodes = counts["terminated"] + counts["truncated"]
    assert episodes >= 5 * N  # several episodes in every sub-env
    if native_cls is CartPole:
        assert counts["terminated"] > 0 and counts["truncated"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_one_host_sync_per_step_on_cuda():
    """The adapter's only sync is the nonzero() that lists finished sub-envs."""

    class QuietTask(NativeVecTask):
        def post_physics_step(self):  # no internal resets: the adapter restarts eagerly
            self.progress_buf += 1
            self.compute_observations()
            self.compute_reward()

    task = QuietTask(Pendulum, 64, max_episode_length=1000, device="cuda")
    env = IsaacVecEnv(task)
    env.reset(seed=0)
    action = torch.zeros(64, 1, device="cuda")
    env.step(action)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(20):
                obs, *_ = env.step(action)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) == 20 and obs.device.type == "cuda"


def test_task_convention_resets_on_the_next_step():
    """The stand-in is faithful: a flagged sub-env is restarted inside the following step."""
    task = NativeVecTask(Pendulum, 2, max_episode_length=4)
    task.reset()
    obs_dict, *_ = task.step(torch.zeros(2, 1))  # first step restarts every sub-env
    assert (task.progress_buf == 0).all()
    for _ in range(3):
        obs_dict, rew, reset_buf, extras = task.step(torch.zeros(2, 1))
    assert reset_buf.all() and extras["time_outs"].all() and (task.progress_buf == 3).all()
    last = obs_dict["obs"].clone()
    obs_dict, rew, reset_buf, extras = task.step(torch.zeros(2, 1))
    assert not reset_buf.any() and (task.progress_buf == 0).all()
    assert not torch.equal(obs_dict["obs"], last)


def test_spaces_devices_and_action_mapping():
    task = NativeVecTask(Pendulum, 3, 41, declared_bounds=(-2.0, 2.0))
    env = IsaacVecEnv(task)
    assert env.env_id == "isaacgym/NativeVecTask" and env.num_envs == 3
    assert env.max_episode_steps == 41
    assert isinstance(env.observation_space, gymnasium.spaces.Box)
    assert env.observation_space.shape == (3,) and env.observation_space.dtype == np.float32
    assert env.action_space == gymnasium.spaces.Box(-2.0, 2.0, (1,), np.float32)
    env.reset(seed=0)
    seen = []
    task_step = task.step
    task.step = lambda a: (seen.append(a), task_step(a))[1]
    env.step(torch.tensor([[-2.0], [0.0], [1.0]]))
    torch.testing.assert_close(seen[0], torch.tensor([[-1.0], [0.0], [0.5]]))
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_unbounded_declared_actions_pass_unchanged():
    task = NativeVecTask(Pendulum, 2, 41, declared_bounds=(-np.inf, np.inf))
    env = IsaacVecEnv(task)
    assert env.action_space == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert env._center is None  # identity: no arithmetic on the actions


def test_step_before_reset_raises():
    env = IsaacVecEnv(NativeVecTask(CartPole, 2, 25))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, 1))


def test_module_imports_without_isaacgym():
    import elegantpod.envs.isaac as isaac

    assert "isaacgym" not in sys.modules or sys.modules["isaacgym"] is None
    assert callable(isaac.make_isaac_env)


def test_make_isaac_env_says_where_isaac_gym_comes_from(monkeypatch):
    monkeypatch.setitem(sys.modules, "isaacgym", None)  # not installed, whatever the machine
    with pytest.raises(ImportError, match="not on PyPI") as info:
        make_isaac_env("Ant", num_envs=4)
    assert "NVIDIA" in str(info.value) and "IsaacVecEnv(task)" in str(info.value)


@pytest.mark.parametrize(
    ("raise_line", "message"),
    [
        (
            'raise ImportError("PyTorch was imported before isaacgym modules.  '
            'Please import torch after isaacgym modules.")',
            "import isaacgym` first",
        ),
        (
            'raise RuntimeError("No gym module found for the active version of Python (3.11)")',
            "Python 3.6-3.8",
        ),
    ],
)
def test_make_isaac_env_explains_a_broken_install(tmp_path, monkeypatch, raise_line, message):
    pkg = tmp_path / "isaacgym"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(raise_line + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "isaacgym", raising=False)
    with pytest.raises(ImportError, match=message):
        make_isaac_env("Ant", num_envs=4)
