"""MJX locomotion (elegantpod.envs.mjx.env): gymnasium parity, the fast physics' drift, the
protocol, DLPack sharing, and errors. Everything runs on the CPU at 8 worlds.

Compiling an MJX step takes 10-40 s on a CPU, so every test here uses the same sizes and
settings per env (``N`` worlds, default keywords): each process compiles each env's two
programs once (and JAX's persistent cache keeps them for the next run).
"""

from __future__ import annotations

import math
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
import torch

from elegantpod.envs.mjx.env import MjxVecEnv
from elegantpod.envs.mjx.setup import cache_dir
from elegantpod.envs.registry import make_env

N = 8
LOCOMOTION = ["HalfCheetah-v5", "Hopper-v5", "Ant-v5", "Humanoid-v5"]
CONTACT_RICH = {"Ant-v5", "Humanoid-v5"}

_envs: dict[tuple[str, str], MjxVecEnv] = {}


def mjx_env(env_id: str, physics: str = "exact") -> MjxVecEnv:
    """One env per id and physics for the whole module (built once, reset by each test)."""
    if (env_id, physics) not in _envs:
        _envs[env_id, physics] = make_env(
            env_id, num_envs=N, device="cpu", seed=0, backend="mjx", physics=physics
        )
    return _envs[env_id, physics]


def _gym_states(env_id: str, seed: int):
    """``N`` states from gymnasium's own env, each after a random number of random steps,
    with an action for each: airborne, landing and standing states alike."""
    env = gymnasium.make(env_id).unwrapped
    rng = np.random.default_rng(seed)
    high = env.action_space.high
    states = []
    for i in range(N):
        env.reset(seed=seed + i)
        for _ in range(int(rng.integers(0, 60))):
            _, _, terminated, _, _ = env.step(rng.uniform(-1, 1, high.shape) * high)
            if terminated:
                break
        states.append((env.data.qpos.copy(), env.data.qvel.copy()))
    actions = rng.uniform(-1, 1, (N, *high.shape)) * high
    return env, states, actions


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Per world: every entry within ``atol + rtol * |b|``."""
    return (np.abs(a - b) <= atol + rtol * np.abs(b)).reshape(len(a), -1).all(axis=1)


@pytest.mark.parametrize("env_id", LOCOMOTION)
def test_exact_physics_steps_as_gymnasium_does_from_the_same_states(env_id):
    """One step from gymnasium's states with gymnasium's actions: positions, velocities,
    the observation (contact forces, inertias included), reward and termination.

    Tolerances: MJX computes in float32 where MuJoCo uses float64, and a step holds up to
    5 substeps of 4 RK4 stages with a contact solve in each: positions to 1e-4, and
    velocities, contact forces and rewards to 2e-3 + 1e-3 relative (measured: 1e-5 to
    1e-3 on velocities, 3e-6 to 2e-4 on rewards).

    Ant and Humanoid collide capsules with the floor under pyramidal friction cones,
    whose pyramid edges follow the contact frame's tangent axes. MJX orients the
    tangents of a capsule-plane contact differently from MuJoCo's C code, so a sliding
    foot meets a differently oriented pyramid: the two simulators then solve different
    (both converged, both legitimate) friction problems. Measured on 40 Ant states, 7
    such states differed by up to 0.24 in a joint velocity, at 1,000 solver iterations on
    both sides as at the defaults, and by at most 4e-3 under elliptic cones. So those
    envs must match in full in at least 6 of 8 worlds and terminate alike in all.
    """
    gym_env, states, actions = _gym_states(env_id, seed=11)
    expected = []
    for (qpos, qvel), action in zip(states, actions, strict=True):
        gym_env.reset(seed=0)  # as a fresh episode: no solver warm start carried over
        gym_env.set_state(qpos, qvel)
        obs, reward, terminated, _, _ = gym_env.step(action)
        expected.append((obs, reward, terminated))
    obs_e, reward_e, term_e = (np.array(x) for x in zip(*expected, strict=True))

    env = mjx_env(env_id)
    env.reset()
    qpos, qvel = (torch.tensor(np.array(x)) for x in zip(*states, strict=True))
    start_obs = env.set_state(qpos, qvel)
    # MJX normalizes the free joint's quaternion, which reset noise leaves unnormalized
    torch.testing.assert_close(env.qpos, qpos.float(), atol=1e-2, rtol=0)
    assert start_obs.shape == (N, *env.observation_space.shape)
    _, reward, terminated, truncated, info = env.step(torch.tensor(actions, dtype=torch.float32))
    final_obs = info["final_obs"].double().numpy()
    assert not truncated.any()
    # the next state is read from the true final observation (worlds that terminated
    # have restarted already)
    matched = (
        _close(final_obs, obs_e, rtol=1e-3, atol=2e-3)
        & np.isclose(reward.double().numpy(), reward_e, rtol=1e-3, atol=2e-3)
        & (terminated.numpy() == term_e)
    )
    qpos_part = gym_env.model.nq - (2 if env_id in CONTACT_RICH else 1)
    positions = _close(final_obs[:, :qpos_part], obs_e[:, :qpos_part], rtol=0, atol=1e-4)
    assert (terminated.numpy() == term_e).all()
    need = 6 if env_id in CONTACT_RICH else N
    assert int(matched.sum()) >= need, (env_id, matched, np.abs(final_obs - obs_e).max(axis=1))
    assert int((matched & positions).sum()) >= need


def test_fast_physics_drifts_from_exact_by_a_bounded_amount():
    """A fixed open-loop gait from the same start states under both physics: the mean
    return per episode and the mean reward per step stay within bounds of exact.

    Ant is chaotic (a flip ends an episode), so single episodes diverge; the bound is on
    the mean over worlds. Measured at 32 worlds x 200 steps (4 Newton iterations): mean
    return 106 vs 130 exact (-19%), reward per step 0.74 vs 0.72; at 1 iteration the
    return fell 38%, which these bounds reject.
    """
    results = {}
    for physics in ("exact", "fast"):
        env = mjx_env("Ant-v5", physics)
        env.reset(seed=5)
        nu = env.action_space.shape[0]
        phase = torch.arange(nu) * 1.3
        ret, length = torch.zeros(N), torch.zeros(N)
        alive = torch.ones(N, dtype=torch.bool)
        for t in range(150):
            action = (0.3 * torch.sin(2 * torch.pi * t / 25 + phase)).expand(N, nu)
            _, reward, terminated, truncated, _ = env.step(action.contiguous())
            ret += reward * alive
            length += alive
            alive &= ~(terminated | truncated)
        results[physics] = (ret.mean().item(), (ret.sum() / length.sum()).item())
    (exact_return, exact_rate), (fast_return, fast_rate) = results["exact"], results["fast"]
    assert exact_return > 20  # the gait stands and walks under exact physics
    assert abs(fast_return - exact_return) <= 0.3 * abs(exact_return), results
    assert abs(fast_rate - exact_rate) <= 0.15 * abs(exact_rate), results


def test_protocol_same_step_autoreset_statistics_and_time_limit():
    env = mjx_env("Hopper-v5")
    obs = env.reset(seed=1)
    assert isinstance(env.observation_space, gymnasium.spaces.Box)
    assert obs.shape == (N, 11) and obs.dtype == torch.float32 and obs.device == env.device
    assert env.max_episode_steps == 1000 and env.physics == "exact"
    np.testing.assert_allclose(env.action_space.high, np.ones(3, np.float32))
    again = env.reset(seed=1)
    torch.testing.assert_close(again, obs)  # a seed fixes the start states
    assert not torch.equal(env.reset(seed=2), obs)
    assert not torch.equal(env.reset(), env.reset())  # no seed: fresh draws each time
    env.reset(seed=1)
    # gymnasium's first observation: qpos0 + noise of scale 5e-3, zero joint velocity noise
    torch.testing.assert_close(again[:, 0], torch.full((N,), 1.25), atol=5e-3, rtol=0)
    ret = torch.zeros(N)
    length = torch.zeros(N, dtype=torch.int64)
    ended = 0
    for _ in range(120):
        action = torch.rand(N, 3) * 2 - 1
        nxt, reward, terminated, truncated, info = env.step(action)
        assert reward.dtype == torch.float32 and terminated.dtype == torch.bool
        assert info["final_obs"].shape == nxt.shape
        ret += reward
        length += 1
        done = terminated | truncated
        torch.testing.assert_close(info["final_obs"][~done], nxt[~done])
        if done.any():
            ended += int(done.sum())
            torch.testing.assert_close(
                info["episode_return"][done], ret[done], rtol=1e-4, atol=1e-4
            )
            assert torch.equal(info["episode_length"][done], length[done])
            assert not torch.allclose(info["final_obs"][done], nxt[done])
            # a restarted world stands at the start again
            torch.testing.assert_close(
                nxt[done][:, 0], torch.full((int(done.sum()),), 1.25), atol=5e-3, rtol=0
            )
            ret[done], length[done] = 0, 0
    assert ended > 0  # random actions topple a Hopper within 120 steps
    # the time limit truncates, and the step still reports the true last observation
    env.max_episode_steps = 3
    env.reset(seed=3)
    for _ in range(3):
        _, _, terminated, truncated, info = env.step(torch.zeros(N, 3))
    assert truncated.all() and not terminated.any() and (info["episode_length"] == 3).all()
    env.max_episode_steps = 1000


def test_the_first_observation_has_no_contact_forces_as_in_gymnasium():
    env = mjx_env("Ant-v5")
    obs = env.reset(seed=0)
    assert obs.shape == (N, 105)
    assert torch.equal(obs[:, 27:], torch.zeros(N, 78))
    gym_obs, _ = gymnasium.make("Ant-v5").reset(seed=0)
    assert np.all(gym_obs[27:] == 0)


def test_tensors_are_shared_with_jax_without_copies():
    env = mjx_env("HalfCheetah-v5")
    env.reset(seed=0)
    worlds = env._state.worlds
    assert env.qpos.data_ptr() == worlds.qpos.unsafe_buffer_pointer()
    assert env.qvel.data_ptr() == worlds.qvel.unsafe_buffer_pointer()
    action = torch.zeros(N, 6)
    assert env._to_jax(action).unsafe_buffer_pointer() == action.data_ptr()


def test_bad_settings_fail_before_any_compiling():
    with pytest.raises(ValueError, match="'CartPole-v1'.*Ant-v5"):
        make_env("CartPole-v1", backend="mjx")
    with pytest.raises(ValueError, match="physics must be one of .*'slow'"):
        make_env("Ant-v5", backend="mjx", physics="slow")
    with pytest.raises(ValueError, match="takes no keyword 'ctrl_weight'.*ctrl_cost_weight"):
        make_env("Ant-v5", backend="mjx", ctrl_weight=0.1)
    with pytest.raises(ValueError, match="healthy_z_range must be a \\(low, high\\) pair"):
        make_env("Ant-v5", backend="mjx", healthy_z_range=0.2)
    with pytest.raises(ValueError, match="backend must be one of .*'jax'"):
        make_env("Ant-v5", backend="jax")
    with pytest.raises(ValueError, match="max_episode_steps must be >= 1, got 0"):
        make_env("Ant-v5", backend="mjx", max_episode_steps=0)
    env = make_env("Ant-v5", num_envs=2, backend="mjx", ctrl_cost_weight=0.1)
    assert env._program is None  # building reads the spaces; nothing is compiled yet
    assert env.params["ctrl_cost_weight"] == 0.1
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(torch.zeros(2, 8))
    hopper = mjx_env("Hopper-v5")
    hopper.reset()
    with pytest.raises(ValueError, match=r"actions of shape \(8, 2\), expected \(8, 3\)"):
        hopper.step(torch.zeros(N, 2))


def test_a_missing_mjx_names_the_extra_to_install():
    code = (
        "import sys; sys.modules['jax'] = None\n"
        "from elegantpod.envs import make_env\n"
        "try:\n"
        "    make_env('Ant-v5', backend='mjx')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "pip install 'elegantpod[mjx]'" in out.stdout, out.stderr


def test_the_compilation_cache_is_private(tmp_path, monkeypatch):
    from elegantpod.envs.mjx.setup import _private_dir

    monkeypatch.setenv("ELEGANTPOD_JAX_CACHE", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"
    assert _private_dir(cache_dir()) and (cache_dir().stat().st_mode & 0o777) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert not _private_dir(shared)  # others could plant compiled code there


class _FakeJax:
    """What the cache set-up reads and writes of ``jax``: no JAX needed, nothing compiled."""

    def __init__(self):
        self.config = self
        self.jax_compilation_cache_dir = None
        self.settings = {}

    def update(self, name, value):
        self.settings[name] = value
        if name == "jax_compilation_cache_dir":
            self.jax_compilation_cache_dir = value


def test_the_compilation_cache_is_refused_where_others_could_swap_it(tmp_path, monkeypatch):
    """Every folder above the cache counts, not just the last: under a folder others can
    write (no sticky bit) the cache could be replaced by a symlink to theirs later."""
    import os

    from elegantpod.envs.mjx.setup import _use_compilation_cache

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("ELEGANTPOD_JAX_CACHE", str(shared / "cache"))
    jax = _FakeJax()
    with pytest.raises(
        ValueError, match=r"other users can write to .*shared' \(mode 0777, no sticky"
    ):
        _use_compilation_cache(jax)
    assert jax.jax_compilation_cache_dir is None and not (shared / "cache").exists()
    # the swap itself: the cache folder is a symlink to another user's folder
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    shared.chmod(0o755)
    (shared / "cache").symlink_to(theirs)
    with pytest.raises(ValueError, match="JAX compilation cache .* it is a symbolic link"):
        _use_compilation_cache(jax)
    assert jax.jax_compilation_cache_dir is None
    # a folder on the way owned by another user (as root here: chown to uid 12345)
    if os.geteuid() == 0:
        (shared / "cache").unlink()
        os.chown(shared, 12345, -1)
        with pytest.raises(ValueError, match="shared' is owned by uid 12345, not by root or you"):
            _use_compilation_cache(jax)
        os.chown(shared, 0, -1)
    # a sticky world-writable parent (as /tmp) is fine for a cache that is ours
    shared.chmod(0o1777)
    _use_compilation_cache(jax)
    assert jax.jax_compilation_cache_dir == str(shared / "cache")
    assert jax.settings["jax_persistent_cache_min_compile_time_secs"] == 1.0
    # the default location only warns, and MJX runs uncached
    monkeypatch.delenv("ELEGANTPOD_JAX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "open"))
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "open").chmod(0o777)
    jax = _FakeJax()
    with pytest.warns(UserWarning, match="runs without a compilation cache"):
        _use_compilation_cache(jax)
    assert jax.jax_compilation_cache_dir is None


@pytest.mark.slow
def test_ppo_learns_mjx_halfcheetah_in_a_pod():
    """PPO on MJX HalfCheetah (exact physics, 200-step episodes) for 40k env steps: the
    training return climbs well clear of a random policy's, and the deterministic
    policy ends up moving forward.

    What is asserted is what PPO does on every CPU measured, not one trajectory: the
    run is deterministic on a given CPU, but XLA compiles the physics for the host's
    instruction set, so another CPU steps worlds with other roundings and, the cheetah
    being chaotic, follows another trajectory. Seed 0 on a 2-vCPU AMD EPYC (AVX-512)
    evaluates 0.0 up to 32k and 126 at 40k; the same run with XLA held to AVX2
    (``XLA_FLAGS=--xla_cpu_max_isa=AVX2``, as on a CPU without AVX-512; torch's own
    kernels held to AVX2 too changed nothing) peaks at 9.3, and a review's 2-vCPU EPYC
    evaluated -0.9 at 40k. So a bar on the best evaluation (50) passed or failed by the
    CPU. Measured, seeds 0 and 1 with AVX-512 and with AVX2 (four trajectories):

    - the first 8k steps' training return, a random policy's that pays the control cost
      of its exploration noise: -53, -47, -52, -56;
    - the mean training return of the last 16k steps rose from it by 51, 58, 69, 68;
    - the best evaluation beat the first (-0.5 to -1.0: a policy standing still) by 126,
      10, 12, 11;
    - with a learning rate of 1e-7 (nothing learned) the rise was 5 and the evaluation
      gain 0.2, which the bars reject (jax 0.10.2, mujoco-mjx 3.17; 45-50 s in all).

    The bars hold a 2x margin under the smallest of each: a start below -20, a rise of
    25, an evaluation gain of 5 (an evaluation's mean over 16 episodes has a standard
    error of about 0.5 here). Pinning XLA to AVX2 for every run would not make runs
    equal across CPUs (a Xeon's AVX-512 run differed from the EPYC's: 205 at 40k), nor
    across jaxlib versions, so it is not done.
    """
    import elegantpod

    result = elegantpod.train(
        "HalfCheetah-v5",
        "ppo",
        seed=0,
        num_envs=16,  # as measured (N worlds learned slower)
        max_steps=40_960,
        eval_episodes=16,
        eval_every_steps=8_192,
        device="cpu",
        env_kwargs={"backend": "mjx", "max_episode_steps": 200},
        horizon=128,
        minibatch_size=256,
        lr=1e-3,
        normalize_obs=True,
        init_log_std=-0.5,
    )
    curve = result.curve
    assert len(curve) == 5, curve
    start = curve[0].train_return_mean
    late = sum(p.train_return_mean for p in curve[-2:]) / 2
    assert start < -20, curve
    assert late - start > 25, curve
    assert result.best_eval_return_mean - curve[0].eval_return_mean > 5, curve


@pytest.mark.slow
def test_a_tournament_of_mjx_pods_runs_on_dask_workers(client, tmp_path):
    """Two PPO pods on MJX HalfCheetah in a tournament on worker processes: each worker
    builds the worlds, trains segments, evaluates, and the leaderboard ranks checkpoints
    that load back into pods on MJX. (HalfCheetah: the cheapest of the four to compile,
    and each worker process compiles its programs once; the physics of every env is
    the parity test's.)"""
    import elegantpod
    from elegantpod.pod.pod import Pod

    t = elegantpod.Tournament(
        "HalfCheetah-v5",
        algos=["ppo"],
        pods=2,
        store=str(tmp_path / "store"),
        client=client,
        max_steps=2 * 1_024,  # one segment per pod: each builds, trains, evaluates, saves
        segment_steps=1_024,
        eval_episodes=N,
        env_kwargs={"backend": "mjx", "max_episode_steps": 100},
        hparams={"ppo": {"num_envs": N, "horizon": 64}},
    )
    t.start()
    summary = t.wait(timeout=600)
    assert summary["status"] == "finished" and summary["pods_failed"] == 0, summary
    board = t.leaderboard
    assert len(board) >= 2 and np.isfinite(board["score_mean"]).all()
    pod = Pod.from_checkpoint(board["checkpoint"].iloc[0])
    assert isinstance(pod.env, MjxVecEnv) and pod.env.env_id == "HalfCheetah-v5"
    assert pod.spec.env_kwargs["backend"] == "mjx" and pod.env_steps > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(healthy_z_range=(math.nan, 1)), "healthy_z_range must not hold NaN"),
        (dict(healthy_z_range=(1.0, 0.2)), r"healthy_z_range must be an ordered \(low, high\)"),
        (dict(healthy_z_range=(math.inf, math.inf)), "healthy_z_range must be an ordered"),
        (dict(contact_force_range=(1, "x")), "contact_force_range must be a .* of numbers"),
        (dict(reset_noise_scale=1e300), r"reset_noise_scale must be in \[0, 10\], got 1e\+300"),
        (dict(reset_noise_scale=-5), r"reset_noise_scale must be in \[0, 10\], got -5"),
        (dict(ctrl_cost_weight=10**400), "ctrl_cost_weight must be finite"),
        (dict(healthy_reward=1e300), r"healthy_reward must be in \[-1e\+06, 1e\+06\]"),
        (dict(num_envs=10**9), "num_envs must be <= 16,777,216, got 1000000000"),
        (dict(num_envs=2**20), r"num_envs=1048576 Ant-v5 worlds need at least .* GiB, more"),
        (dict(seed=2**64), "seed must be <= "),
        (dict(max_episode_steps=10**18), "max_episode_steps must be <= 1,000,000,000"),
    ],
)
def test_bad_numbers_fail_before_anything_compiles(kwargs, message, monkeypatch):
    """Issue 29, item 10: NaN or inverted ranges and absurd noise were taken, and
    num_envs=10**9 aborted the process (std::bad_alloc) at the first reset."""
    import elegantpod.envs.mjx.env as mjx_module

    def no_jax():
        raise AssertionError("JAX was set up for an env with bad settings")

    monkeypatch.setattr(mjx_module, "_setup_jax", no_jax)
    monkeypatch.setattr(mjx_module, "_memory_bytes", lambda device: 2**30)  # a 1 GiB device
    with pytest.raises(ValueError, match=message):
        make_env("Ant-v5", backend="mjx", **{"num_envs": 2, **kwargs})


def test_a_torch_view_held_across_steps_stays_valid_and_steps_copy_nothing_from_the_host():
    """``env.qpos``/``qvel`` are views of JAX's memory, and the step donates its state:
    a view held across a step must not be donated (GPUs refuse that) or change under
    the holder; and no step copies a host value (the time limit) to the device."""
    import jax

    env = mjx_env("Hopper-v5")
    env.reset(seed=4)
    action = torch.full((N, 3), 0.5)
    env.step(action)  # the limit goes to the device once, outside the guard
    qpos, qvel = env.qpos, env.qvel
    assert qpos.data_ptr() == env._state.worlds.qpos.unsafe_buffer_pointer()  # no copy
    held_q, held_v = qpos.clone(), qvel.clone()
    with jax.transfer_guard_host_to_device("disallow"):
        for _ in range(3):
            env.step(action)
    assert torch.equal(qpos, held_q) and torch.equal(qvel, held_v)  # valid, unchanged
    # with no view taken since, the state is donated (updated in place), not copied
    carried = env._state
    env.step(action)
    assert carried.worlds.qpos.is_deleted() and carried.worlds.qvel.is_deleted()
    assert not torch.equal(env.qpos, held_q)  # the worlds moved on
    # a state put in from torch tensors is not donated from under them either
    start_q, start_v = held_q.clone(), held_v.clone()
    env.set_state(start_q, start_v)
    env.step(action)
    assert torch.equal(start_q, held_q) and torch.equal(start_v, held_v)


def test_jax_settings_hold_when_jax_was_imported_first_and_preallocation_is_refused():
    """Preallocation off and (on CUDA) command buffers off are set before JAX starts its
    backend even when jax was imported first; a GPU backend started with preallocation
    on is refused by name; the command-buffer compile option is one XLA accepts."""
    from elegantpod.envs.mjx.setup import NO_COMMAND_BUFFERS, PREALLOCATE, preallocation_problem

    code = (
        "import os, sys, torch\n"
        "os.environ.pop('XLA_PYTHON_CLIENT_PREALLOCATE', None)\n"
        "import jax\n"
        "from elegantpod.envs.mjx.env import _setup_jax\n"
        "from elegantpod.envs.mjx.setup import backend_started\n"
        "assert not backend_started()\n"
        "jax_, _ = _setup_jax(torch.device('cpu'))\n"
        "print(os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'], os.environ.get('XLA_FLAGS'))\n"
        f"f = jax.jit(lambda x: x * 2, compiler_options={NO_COMMAND_BUFFERS!r})\n"
        "print(float(f(jax.numpy.ones(2)).sum()), backend_started())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stdout.splitlines()[-2:]
    flag = "xla_gpu_enable_command_buffer=" if torch.cuda.is_available() else "eigen=false"
    assert first.split()[0] == "false" and flag in first
    assert second == "4.0 True"
    # what a process whose GPU backend already started gets
    message = preallocation_problem({}, True, {"cuda", "cpu"})
    assert message is not None and PREALLOCATE in message and "false" in message
    assert preallocation_problem({PREALLOCATE: "false"}, True, {"cuda"}) is None
    assert (
        preallocation_problem({"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}, True, {"cuda"}) is None
    )
    assert preallocation_problem({}, False, {"cuda"}) is None  # not started: still settable
    assert preallocation_problem({}, True, {"cpu"}) is None  # CPUs do not preallocate


def test_the_pod_size_estimate_counts_mjx_worlds():
    """Packing pods on a GPU counts MJX's worlds, which grow with ``num_envs``."""
    from elegantpod.agents.ppo import PPOConfig
    from elegantpod.config import PodSpec
    from elegantpod.envs.mjx.memory import bytes_per_world
    from elegantpod.pod.memory import estimate_pod_bytes

    def size(num_envs: int, **env_kwargs) -> int:
        hp = PPOConfig(num_envs=num_envs, horizon=8, minibatch_size=64)
        spec = PodSpec(env_id="Ant-v5", algo="ppo", hparams=hp, env_kwargs=env_kwargs)
        return estimate_pod_bytes(spec, obs_dim=105, act_dim=8)

    world = bytes_per_world("Ant-v5", "fast")
    assert 10_000 < world < 10_000_000  # tens of kilobytes: MjData, contacts, rows
    assert bytes_per_world("Ant-v5", "exact") > world  # more contacts collide
    small, large = (
        size(64, backend="mjx", physics="fast"),
        size(4096, backend="mjx", physics="fast"),
    )
    assert large - small >= (4096 - 64) * world  # every world counted
    # behind the gymnasium adapter, one env object per sub-env (no worlds of MJX's)
    from elegantpod.pod.memory import GYM_SUB_ENV_BYTES

    assert size(4096) - size(64) >= (4096 - 64) * GYM_SUB_ENV_BYTES
    assert size(4096, backend="mjx") >= size(4096, backend="mjx", physics="exact")
