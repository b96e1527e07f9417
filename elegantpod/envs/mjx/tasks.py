"""Gymnasium's v5 MuJoCo locomotion tasks, term for term, as pure JAX functions of MJX data.

Each :class:`Task` restates one gymnasium env (``gymnasium/envs/mujoco/*_v5.py``) for one
MJX world: the observation, the reward terms, the healthy test that terminates an
episode, and the reset noise. :mod:`elegantpod.envs.mjx.env` vectorizes them over thousands
of worlds. What a task computes from which MuJoCo field is gymnasium's, down to details
that matter for parity:

- the forward velocity is a finite difference of a position read from ``xpos`` (Ant),
  ``xipos`` (Humanoid's centre of mass) or ``qpos[0]`` (Hopper, HalfCheetah) before and
  after ``frame_skip`` physics steps; ``xpos`` after ``mj_step`` holds the kinematics
  of the last substep's start, in gymnasium and in MJX alike;
- contact forces (``cfrc_ext``) come from ``mj_rnePostConstraint`` after the steps, as
  gymnasium calls it, and are zero in the first observation of an episode (gymnasium's
  reset runs ``mj_forward`` only);
- the healthy ranges are inclusive for Ant and strict for Hopper and Humanoid, as
  gymnasium writes them.

What the tasks need besides their terms has a module each, all reading :data:`TASKS`:
the user's keywords checked (:mod:`elegantpod.envs.mjx.params`), gymnasium's model
loaded with one of two physics fidelities (:mod:`elegantpod.envs.mjx.physics`), and the
memory one world takes on its device (:mod:`elegantpod.envs.mjx.memory`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Task:
    """One gymnasium v5 locomotion env, as data plus pure functions of one MJX world.

    The functions take ``(params, m, d, ...)``: ``params`` is the env's keyword
    arguments (gymnasium's defaults, updated by the user's), ``m`` an ``mjx.Model`` and
    ``d`` one world's ``mjx.Data``.
    """

    env_id: str
    xml: str
    """File name in gymnasium's ``envs/mujoco/assets``."""
    frame_skip: int
    defaults: dict[str, Any]
    """gymnasium's keyword defaults for the reward, termination and reset terms."""
    position: Callable
    """``(m, d) -> array``: where the robot is; its difference over a step, divided by
    ``dt``, is the velocity the forward reward pays for (index 0: x)."""
    observe: Callable
    """``(params, m, d) -> (obs_dim,)``."""
    reward: Callable
    """``(params, m, d, action, velocity) -> (reward, healthy)``."""
    reset_noise: Callable
    """``(params, key, qpos0, nv) -> (qpos, qvel)``: a fresh episode's state."""
    needs_contact_forces: bool
    fast_contacts: tuple[str, ...] | None = None
    """Geoms that keep colliding with the floor under ``physics="fast"`` (``None``: all)."""
    max_episode_steps: int = 1000


def _data_field(d, name: str):
    """A field of ``mjx.Data`` that newer MJX keeps on its backend part (``d._impl``)."""
    impl = getattr(d, "_impl", None)
    return getattr(impl, name) if hasattr(impl, name) else getattr(d, name)


def _uniform(jax, key, shape, scale):
    return jax.random.uniform(key, shape, minval=-scale, maxval=scale)


def _uniform_both(params, key, qpos0, nv):
    """Hopper and Humanoid: uniform noise on positions and velocities."""
    import jax

    k1, k2 = jax.random.split(key)
    scale = params["reset_noise_scale"]
    return qpos0 + _uniform(jax, k1, qpos0.shape, scale), _uniform(jax, k2, (nv,), scale)


def _uniform_normal(params, key, qpos0, nv):
    """Ant and HalfCheetah: uniform noise on positions, Gaussian on velocities."""
    import jax

    k1, k2 = jax.random.split(key)
    scale = params["reset_noise_scale"]
    qpos = qpos0 + _uniform(jax, k1, qpos0.shape, scale)
    return qpos, scale * jax.random.normal(k2, (nv,))


# -- Ant-v5 ---------------------------------------------------------------------------
def _ant_contact_forces(params, d):
    import jax.numpy as jnp

    low, high = params["contact_force_range"]
    return jnp.clip(_data_field(d, "cfrc_ext"), low, high)


def _ant_observe(params, m, d):
    import jax.numpy as jnp

    parts = [d.qpos[2:], d.qvel]
    if params["include_cfrc_ext_in_observation"]:
        parts.append(_ant_contact_forces(params, d)[1:].ravel())
    return jnp.concatenate(parts)


def _ant_reward(params, m, d, action, velocity):
    import jax.numpy as jnp

    state = jnp.concatenate([d.qpos, d.qvel])
    low, high = params["healthy_z_range"]
    healthy = jnp.isfinite(state).all() & (low <= d.qpos[2]) & (d.qpos[2] <= high)
    forward = params["forward_reward_weight"] * velocity[0]
    ctrl = params["ctrl_cost_weight"] * jnp.sum(jnp.square(action))
    contact = params["contact_cost_weight"] * jnp.sum(jnp.square(_ant_contact_forces(params, d)))
    return forward + healthy * params["healthy_reward"] - ctrl - contact, healthy


# -- Humanoid-v5 ------------------------------------------------------------------------
def _mass_center(m, d):
    import jax.numpy as jnp

    return (jnp.einsum("b,bj->j", m.body_mass, _data_field(d, "xipos")) / jnp.sum(m.body_mass))[:2]


def _humanoid_observe(params, m, d):
    import jax.numpy as jnp

    parts = [d.qpos[2:], d.qvel]
    if params["include_cinert_in_observation"]:
        parts.append(_data_field(d, "cinert")[1:].ravel())
    if params["include_cvel_in_observation"]:
        parts.append(_data_field(d, "cvel")[1:].ravel())
    if params["include_qfrc_actuator_in_observation"]:
        parts.append(_data_field(d, "qfrc_actuator")[6:])
    if params["include_cfrc_ext_in_observation"]:
        parts.append(_data_field(d, "cfrc_ext")[1:].ravel())
    return jnp.concatenate(parts)


def _humanoid_reward(params, m, d, action, velocity):
    import jax.numpy as jnp

    low, high = params["healthy_z_range"]
    healthy = (low < d.qpos[2]) & (d.qpos[2] < high)
    forward = params["forward_reward_weight"] * velocity[0]
    # gymnasium charges data.ctrl, which after the step holds the action as sent
    ctrl = params["ctrl_cost_weight"] * jnp.sum(jnp.square(action))
    cost_low, cost_high = params["contact_cost_range"]
    contact = jnp.clip(
        params["contact_cost_weight"] * jnp.sum(jnp.square(_data_field(d, "cfrc_ext"))),
        cost_low,
        cost_high,
    )
    return forward + healthy * params["healthy_reward"] - ctrl - contact, healthy


# -- Hopper-v5 --------------------------------------------------------------------------
def _hopper_observe(params, m, d):
    import jax.numpy as jnp

    return jnp.concatenate([d.qpos[1:], jnp.clip(d.qvel, -10.0, 10.0)])


def _hopper_reward(params, m, d, action, velocity):
    import jax.numpy as jnp

    z, angle = d.qpos[1], d.qpos[2]
    state = jnp.concatenate([d.qpos[2:], d.qvel])
    s_low, s_high = params["healthy_state_range"]
    z_low, z_high = params["healthy_z_range"]
    a_low, a_high = params["healthy_angle_range"]
    healthy = (
        jnp.all((s_low < state) & (state < s_high))
        & (z_low < z)
        & (z < z_high)
        & (a_low < angle)
        & (angle < a_high)
    )
    forward = params["forward_reward_weight"] * velocity[0]
    ctrl = params["ctrl_cost_weight"] * jnp.sum(jnp.square(action))
    return forward + healthy * params["healthy_reward"] - ctrl, healthy


# -- HalfCheetah-v5 -------------------------------------------------------------------
def _cheetah_observe(params, m, d):
    import jax.numpy as jnp

    return jnp.concatenate([d.qpos[1:], d.qvel])


def _cheetah_reward(params, m, d, action, velocity):
    import jax.numpy as jnp

    forward = params["forward_reward_weight"] * velocity[0]
    ctrl = params["ctrl_cost_weight"] * jnp.sum(jnp.square(action))
    return forward - ctrl, jnp.array(True)  # never unhealthy: no termination


def _x_position(m, d):
    return d.qpos[:1]  # the root's slide joint along x


TASKS: dict[str, Task] = {
    "Ant-v5": Task(
        env_id="Ant-v5",
        xml="ant.xml",
        frame_skip=5,
        defaults={
            "forward_reward_weight": 1.0,
            "ctrl_cost_weight": 0.5,
            "contact_cost_weight": 5e-4,
            "healthy_reward": 1.0,
            "terminate_when_unhealthy": True,
            "healthy_z_range": (0.2, 1.0),
            "contact_force_range": (-1.0, 1.0),
            "reset_noise_scale": 0.1,
            "include_cfrc_ext_in_observation": True,
        },
        position=lambda m, d: d.xpos[1, :2],  # main_body=1, the torso
        observe=_ant_observe,
        reward=_ant_reward,
        reset_noise=_uniform_normal,
        needs_contact_forces=True,
        fast_contacts=(
            "torso_geom",
            "left_ankle_geom",
            "right_ankle_geom",
            "third_ankle_geom",
            "fourth_ankle_geom",
        ),
    ),
    "Humanoid-v5": Task(
        env_id="Humanoid-v5",
        xml="humanoid.xml",
        frame_skip=5,
        defaults={
            "forward_reward_weight": 1.25,
            "ctrl_cost_weight": 0.1,
            "contact_cost_weight": 5e-7,
            "contact_cost_range": (-math.inf, 10.0),
            "healthy_reward": 5.0,
            "terminate_when_unhealthy": True,
            "healthy_z_range": (1.0, 2.0),
            "reset_noise_scale": 1e-2,
            "include_cinert_in_observation": True,
            "include_cvel_in_observation": True,
            "include_qfrc_actuator_in_observation": True,
            "include_cfrc_ext_in_observation": True,
        },
        position=_mass_center,
        observe=_humanoid_observe,
        reward=_humanoid_reward,
        reset_noise=_uniform_both,
        needs_contact_forces=True,
        fast_contacts=("right_foot", "left_foot", "right_shin1", "left_shin1", "butt"),
    ),
    "Hopper-v5": Task(
        env_id="Hopper-v5",
        xml="hopper.xml",
        frame_skip=4,
        defaults={
            "forward_reward_weight": 1.0,
            "ctrl_cost_weight": 1e-3,
            "healthy_reward": 1.0,
            "terminate_when_unhealthy": True,
            "healthy_state_range": (-100.0, 100.0),
            "healthy_z_range": (0.7, math.inf),
            "healthy_angle_range": (-0.2, 0.2),
            "reset_noise_scale": 5e-3,
        },
        position=_x_position,
        observe=_hopper_observe,
        reward=_hopper_reward,
        reset_noise=_uniform_both,
        needs_contact_forces=False,
    ),
    "HalfCheetah-v5": Task(
        env_id="HalfCheetah-v5",
        xml="half_cheetah.xml",
        frame_skip=5,
        defaults={
            "forward_reward_weight": 1.0,
            "ctrl_cost_weight": 0.1,
            "reset_noise_scale": 0.1,
        },
        position=_x_position,
        observe=_cheetah_observe,
        reward=_cheetah_reward,
        reset_noise=_uniform_normal,
        needs_contact_forces=False,
    ),
}
"""The locomotion envs that ``make_env(..., backend="mjx")`` builds."""
