"""How many bytes one MJX world takes on its device, counted from the model alone.

Why a module of its own: a pod's worlds sit beside its networks and buffers (and other
pods packed on the same GPU), and the pod's memory estimate
(:func:`elegantpod.pod.memory.estimate_pod_bytes`) counts them where pods are only being
planned, where importing JAX would start its backend. So the count follows MJX's static
sizing of ``mjx.Data`` from the ``MjModel`` of :mod:`elegantpod.envs.mjx.physics`.
"""

from __future__ import annotations

import functools

from elegantpod.envs.mjx.physics import load_model
from elegantpod.envs.mjx.tasks import TASKS

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
