"""Gymnasium's MuJoCo model of an MJX task, with the options of one of two physics.

Why a module of its own: the choice of physics is a trade between parity and speed that
the env, the memory estimate (:mod:`elegantpod.envs.mjx.memory`) and the tests all make
by name, on the ``MjModel`` alone, without importing JAX. Two fidelities (see
:func:`physics_options`): ``"exact"`` is gymnasium's model with its own options
(Humanoid's PGS solver, which MJX lacks, becomes Newton: the same convex problem, solved
from the primal side), and ``"fast"`` is tuned for accelerators as MJX's documentation
advises.
"""

from __future__ import annotations

from pathlib import Path

from elegantpod.envs.mjx.tasks import Task

PHYSICS = ("exact", "fast")
"""The physics fidelities, by name."""


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
    the last step's accelerations; the fewer iterations, the lower a fixed gait's
    return on Ant: ``benchmarks/README.md``), no Euler damping (an extra factorization
    per step), the semi-implicit Euler integrator in place of RK4 (one force evaluation
    per substep instead of four), and, for Ant and Humanoid, floor contacts only for the geoms that
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
