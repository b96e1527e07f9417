"""The jitted program of an MJX env: the step with its auto-reset, which also starts
episodes from reset noise or from given states, over a :class:`Run`, the carry.

Why a module of its own: this is the part that runs on the accelerator, written in JAX
and compiled by XLA once per env size, while :class:`~elegantpod.envs.mjx.env.MjxVecEnv`
around it is torch and Python. Keeping the XLA side apart lets it be read as one
program: every physics step, the task's terms (:mod:`elegantpod.envs.mjx.tasks`), the
time limit, the episode statistics and the reset of finished worlds, with no host work
in between.
"""

from __future__ import annotations

from typing import Any, NamedTuple, get_type_hints

from elegantpod.envs.mjx.tasks import Task


class Run(NamedTuple):
    """What one env carries from step to step, all JAX arrays with leading ``num_envs``."""

    worlds: Any
    """The batched ``mjx.Data``."""
    elapsed: Any
    """Steps of each world's episode so far (int32)."""
    episode_return: Any
    """Return of each world's episode so far (float32)."""
    key: Any
    """The reset-noise key."""


# Postponed annotations leave the constructor's as ForwardRef('Any'), to be resolved in
# the globals of the namespace collections.namedtuple built it in, which lack this
# module's names: pdoc warned (its issue 765), typing.get_type_hints(Run.__new__) raised.
# Resolved once here, in this module (no JAX: the fields are typed Any).
Run.__new__.__annotations__ = get_type_hints(Run)


def make_functions(jax, mjx, task: Task, params: dict, model, options: dict | None = None):
    """``blank(m, n)`` and ``step(m, state, action, limit, qpos, qvel, begin, given)``,
    jitted (with XLA's compile ``options``).

    ``state`` is a :class:`Run`. ``step`` returns the next state and ``(obs, final_obs,
    reward, terminated, truncated, episode_return, episode_length)``; worlds whose
    episode ended are reset inside the same program (behind a ``lax.cond``, so steps
    where none ended skip the reset's forward pass).

    The same program starts episodes: with ``begin`` true every world restarts, from
    fresh reset noise or, with ``given`` too, from the states ``(qpos, qvel)`` (which are
    ignored otherwise), and no step is counted. Why one program for reset, set_state and
    step: compiling costs 10-80 s per env on a CPU, a third of it in the forward pass
    that a separate start program would compile a second time. ``blank`` makes the
    first :class:`Run` for that start to replace (cheap: no physics in it).
    """
    jnp = jax.numpy
    dt = float(model.opt.timestep) * task.frame_skip
    nv = int(model.nv)
    terminate = params.get("terminate_when_unhealthy", False)

    def worlds_at(m, qpos, qvel):
        # gymnasium: mj_resetData, then set_state(qpos, qvel) runs mj_forward
        def world(qpos, qvel):
            return mjx.forward(m, mjx.make_data(m).replace(qpos=qpos, qvel=qvel))

        return jax.vmap(world)(qpos, qvel)

    def draw(m, sub, n):
        """Fresh episodes' ``(qpos, qvel)`` for ``n`` worlds, from the key ``sub``."""
        one = lambda k: task.reset_noise(params, k, m.qpos0, nv)  # noqa: E731
        return jax.vmap(one)(jax.random.split(sub, n))

    def observe(m, d):
        return task.observe(params, m, d).astype(jnp.float32)

    def step_world(m, d, action):
        before = task.position(m, d)
        d = d.replace(ctrl=action)
        d = jax.lax.fori_loop(0, task.frame_skip, lambda _, d: mjx.step(m, d), d)
        if task.needs_contact_forces:
            d = mjx.rne_postconstraint(m, d)
        velocity = (task.position(m, d) - before) / dt
        reward, healthy = task.reward(params, m, d, action, velocity)
        terminated = jnp.logical_not(healthy) & terminate
        return d, observe(m, d), reward.astype(jnp.float32), terminated

    def blank(m, n):
        """``n`` worlds of zeros (never stepped from: :func:`step` with ``begin`` replaces
        them), with a key to be replaced too."""
        worlds = jax.vmap(lambda _: mjx.make_data(m))(jnp.arange(n))
        zero = jnp.zeros(n, jnp.int32)
        return Run(worlds, zero, zero.astype(jnp.float32), jax.random.PRNGKey(0))

    def step(m, state: Run, action, limit, qpos, qvel, begin, given):
        worlds, elapsed, episode_return, key = state
        n = action.shape[0]
        # at a start the physics step runs too (on worlds about to be replaced): skipping
        # it behind a lax.cond would cost a device-to-host read of the flag at every step
        # on a GPU, for the sake of a call made once per episode batch
        worlds, final_obs, reward, terminated = jax.vmap(step_world, in_axes=(None, 0, 0))(
            m, worlds, action
        )
        reward = jnp.where(begin, 0.0, reward)
        terminated = terminated & jnp.logical_not(begin)
        elapsed = jnp.where(begin, 0, elapsed + 1)
        episode_return = jnp.where(begin, 0.0, episode_return + reward)
        truncated = (elapsed >= limit) & jnp.logical_not(begin)
        done = terminated | truncated | begin
        key, sub = jax.random.split(key)

        def restart(worlds):
            fresh_qpos, fresh_qvel = draw(m, sub, n)
            use = begin & given
            fresh = worlds_at(m, jnp.where(use, qpos, fresh_qpos), jnp.where(use, qvel, fresh_qvel))

            def pick(new, old):
                return jnp.where(done.reshape((n,) + (1,) * (old.ndim - 1)), new, old)

            worlds = jax.tree_util.tree_map(pick, fresh, worlds)
            return worlds, jax.vmap(observe, in_axes=(None, 0))(m, worlds)

        worlds, obs = jax.lax.cond(done.any(), restart, lambda w: (w, final_obs), worlds)
        final_obs = jnp.where(begin, obs, final_obs)
        state = Run(
            worlds,
            jnp.where(done, 0, elapsed),
            jnp.where(done, 0.0, episode_return),
            key,
        )
        out = (obs, final_obs, reward, terminated, truncated, episode_return, elapsed)
        return state, out

    # the state is donated: XLA updates the worlds in place rather than copying them
    return (
        jax.jit(blank, static_argnums=1, compiler_options=options),
        jax.jit(step, donate_argnums=1, compiler_options=options),
    )
