"""Gymnasium's v5 MuJoCo locomotion tasks, term for term, as pure JAX functions of MJX data.

Each :class:`Task` restates one gymnasium env (``gymnasium/envs/mujoco/*_v5.py``) for one
MJX world: the observation, the reward terms, the healthy test that terminates an
episode, and the reset noise. :mod:`elegantpod.envs.mjx` vectorizes them over thousands
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

Two physics fidelities, chosen by name (see :func:`physics_options`): ``"exact"`` is
gymnasium's model with its own options (Humanoid's PGS solver, which MJX lacks,
becomes Newton: the same convex problem, solved from the primal side), and ``"fast"``
is tuned for accelerators as MJX's documentation advises.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

PHYSICS = ("exact", "fast")


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


def task_params(task: Task, kwargs: dict[str, Any]) -> dict[str, Any]:
    """gymnasium's defaults updated by ``kwargs``; an unknown keyword names the known ones."""
    bad = sorted(set(kwargs) - set(task.defaults))
    if bad:
        raise ValueError(
            f"{task.env_id!r} with backend='mjx' takes no keyword "
            f"{', '.join(repr(b) for b in bad)}; its keywords: "
            f"{', '.join(['physics', 'max_episode_steps', *task.defaults])}"
        )
    params = {**task.defaults, **kwargs}
    for key, value in params.items():
        default = task.defaults[key]
        where = f"{task.env_id}: {key}"
        if isinstance(default, tuple):
            params[key] = _range(where, value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be True or False, got {_shown(value)}")
        else:
            high = MAX_NOISE_SCALE if key == "reset_noise_scale" else MAX_WEIGHT
            low = 0.0 if key == "reset_noise_scale" else -MAX_WEIGHT
            params[key] = _number(where, value, low, high)
    return params


MAX_NOISE_SCALE = 10.0
"""Largest ``reset_noise_scale``: gymnasium's are 0.005 to 0.1, and a scale of 1e300
started every world in a state the physics cannot step."""
MAX_WEIGHT = 1e6
"""Largest size of a reward weight: a weight of 1e300 overflows the float32 reward."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _number(where: str, value: Any, low: float, high: float) -> float:
    """``value`` as a finite float in ``[low, high]``, or a ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} must be a number, got {_shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # a 400-digit int
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{where} must be finite, got {_shown(value)}")
    if not low <= number <= high:
        raise ValueError(f"{where} must be in [{low:g}, {high:g}], got {_shown(value)}")
    return number


def _range(where: str, value: Any) -> tuple[float, float]:
    """A ``(low, high)`` pair of numbers, not NaN, ``low <= high``, either end possibly
    infinite (gymnasium's Hopper: ``(0.7, inf)``) but not both on one side."""
    if not (isinstance(value, list | tuple) and len(value) == 2):
        raise ValueError(f"{where} must be a (low, high) pair, got {_shown(value)}")
    ends = []
    for end in value:
        if isinstance(end, bool) or not isinstance(end, int | float):
            raise ValueError(f"{where} must be a (low, high) pair of numbers, got {_shown(value)}")
        try:
            ends.append(float(end))
        except OverflowError:
            ends.append(math.copysign(math.inf, end))
    low, high = ends
    if math.isnan(low) or math.isnan(high):
        raise ValueError(f"{where} must not hold NaN, got {_shown(value)}")
    if not low <= high or low == math.inf or high == -math.inf:
        raise ValueError(f"{where} must be an ordered (low, high) pair, got {_shown(value)}")
    return low, high


def load_model(task: Task, physics: str):
    """gymnasium's ``MjModel`` of ``task`` with the options of ``physics``."""
    import gymnasium
    import mujoco

    if physics not in PHYSICS:
        raise ValueError(f"physics must be one of {PHYSICS}, got {physics!r}")
    assets = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
    model = mujoco.MjModel.from_xml_path(str(assets / task.xml))
    physics_options(model, task, physics)
    return model


def physics_options(model, task: Task, physics: str) -> None:
    """Set ``model``'s options for ``physics``, in place.

    ``"exact"`` keeps gymnasium's options; MJX has no PGS solver, so a PGS model
    (Humanoid) is solved with Newton, which finds the same constrained accelerations
    (both solve one convex problem, from the dual and the primal side).

    ``"fast"`` follows MJX's performance advice for accelerators: four Newton iterations
    and eight line-search steps in place of 100 and 50 (the solver is warm-started from
    the last step's accelerations; on Ant one iteration cut a fixed gait's return by
    38%, four by 19%), no Euler damping (an extra factorization per step), the
    semi-implicit Euler integrator in place of RK4 (one force evaluation per substep
    instead of four), and, for Ant and Humanoid, floor contacts only for the geoms that
    normally touch it (``Task.fast_contacts``), which shrinks the contact set MJX
    evaluates for every world at every step. Its physics differs from gymnasium's;
    ``tests/envs/test_mjx.py`` bounds how far a fixed policy's returns drift.
    """
    import mujoco

    if model.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
        model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    if physics == "exact":
        return
    model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    model.opt.iterations = 4
    model.opt.ls_iterations = 8
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EULERDAMP
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    if task.fast_contacts is not None:
        keep = {mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in task.fast_contacts}
        floor_body = 0
        for g in range(model.ngeom):
            if model.geom_bodyid[g] != floor_body and g not in keep:
                model.geom_contype[g] = 0
                model.geom_conaffinity[g] = 0


# ----------------------------------------------------------------------- world memory
_PAIR_CONTACTS = {
    ("plane", "sphere"): 1,
    ("capsule", "plane"): 2,
    ("box", "plane"): 4,
    ("sphere", "sphere"): 1,
    ("capsule", "sphere"): 1,
    ("capsule", "capsule"): 1,
}
"""Contacts MJX reserves for a colliding geom pair, by geom types (4 for the rest)."""

WORKING_COPIES = 3
"""Worlds an env holds at once per sub-env: the carried state, the next state a step
computes (donation lets XLA reuse the carried one, but the step's temporaries, such as
the solver's, are as large), and the fresh worlds an auto-reset computes for every
sub-env before it picks the finished ones."""


@functools.lru_cache(maxsize=32)
def bytes_per_world(env_id: str, physics: str) -> int:
    """About how many bytes one MJX world of ``env_id`` under ``physics`` takes on its
    device, working copies included (:data:`WORKING_COPIES`).

    Why: a pod's worlds sit beside its networks and buffers (and other pods packed on
    the same GPU); packing must count them. MJX sizes every array statically from the
    model: ``mjx.Data`` holds ``MjData``'s arrays in float32, one contact slot for every
    contact a colliding geom pair can make, and dense constraint rows (``efc_J`` is
    ``nefc x nv``) for each contact's friction pyramid, each limited joint and each
    equality. Counted here from the ``MjModel`` alone, without importing JAX (which would
    start its backend where the pods are only being planned).
    """
    import mujoco
    import numpy as np

    task = TASKS[env_id]
    model = load_model(task, physics)
    data = mujoco.MjData(model)
    floats = sum(
        getattr(data, name).size
        for name in dir(data)
        if not name.startswith("_") and isinstance(getattr(data, name, None), np.ndarray)
    )
    contacts, rows = _contact_rows(model)
    rows += int(np.count_nonzero(model.jnt_limited)) + 6 * int(model.neq)
    nv = int(model.nv)
    floats += 32 * contacts + rows * (nv + 12) + nv * nv  # contacts, efc rows, solver's H
    return 4 * floats * WORKING_COPIES


def _contact_rows(model) -> tuple[int, int]:
    """Contact slots and their constraint rows, over the geom pairs that can collide."""
    import mujoco

    names = {int(v): k for k, v in vars(mujoco.mjtGeom).items() if k.startswith("mjGEOM_")}
    kind = [names.get(int(t), "other")[len("mjGEOM_") :].lower() for t in model.geom_type]
    weld, parent = model.body_weldid, model.body_parentid
    pyramidal = model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    contacts = rows = 0
    for a in range(model.ngeom):
        for b in range(a + 1, model.ngeom):
            ta, ca = int(model.geom_contype[a]), int(model.geom_conaffinity[a])
            tb, cb = int(model.geom_contype[b]), int(model.geom_conaffinity[b])
            if not (ta & cb or tb & ca):
                continue
            ba, bb = weld[model.geom_bodyid[a]], weld[model.geom_bodyid[b]]
            if ba == bb or (ba and bb and (parent[ba] == bb or parent[bb] == ba)):
                continue  # one rigid body, or parent and child (MuJoCo's filterparent)
            n = _PAIR_CONTACTS.get(tuple(sorted((kind[a], kind[b]))), 4)
            dim = max(int(model.geom_condim[a]), int(model.geom_condim[b]))
            per = 1 if dim == 1 else (2 * (dim - 1) if pyramidal else dim)
            contacts += n
            rows += n * per
    return contacts, rows
