"""Native torch twins of gymnasium's classic-control tasks.

Each class reproduces gymnasium's dynamics step for step (``tests/envs/test_classic.py``
drives both from the same states with the same actions), but simulates thousands of
sub-envs in one set of tensor ops on any device. States are feature-major
``(state_dim, num_envs)``; see :class:`~elegantpod.envs.base.TorchVecEnv`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces

from elegantpod.envs.base import Tensor, TorchVecEnv


class UniformReset:
    """Mixin for a :class:`TorchVecEnv`: initial states drawn uniformly from the box
    ``[reset_low, reset_high]``, as gymnasium's classic-control envs draw theirs.

    A subclass sets ``reset_low`` and ``reset_high`` (one bound per state row) and lists
    this class before ``TorchVecEnv``; draws use the env's generator, so ``reset(seed)``
    is reproducible.
    """

    reset_low: tuple[float, ...] = ()
    reset_high: tuple[float, ...] = ()

    def _sample_initial_state(self, n: int) -> Tensor:
        if not hasattr(self, "_reset_box"):
            low = torch.tensor(self.reset_low, device=self.device).unsqueeze(1)
            high = torch.tensor(self.reset_high, device=self.device).unsqueeze(1)
            self._reset_box = (low, high - low)
        low, width = self._reset_box
        u = torch.rand(len(self.reset_low), n, generator=self.generator, device=self.device)
        return u.mul_(width).add_(low)

    @classmethod
    def initial_state(cls, u: Tensor) -> Tensor:
        """The same box for the fused step's counter-based noise (``TorchVecEnv``)."""
        rows = [
            lo + (hi - lo) * u[i]
            for i, (lo, hi) in enumerate(zip(cls.reset_low, cls.reset_high, strict=True))
        ]
        return torch.stack(rows)


class CartPole(UniformReset, TorchVecEnv):
    """CartPole-v1: balance a pole on a cart; reward 1 per step, 500-step limit."""

    env_id = "CartPole-v1"
    default_max_episode_steps = 500
    state_dim = 4
    reset_low, reset_high = (-0.05,) * 4, (0.05,) * 4
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masscart + masspole
    polemass_length = masspole * length
    x_threshold = 2.4
    theta_threshold = 12 * 2 * math.pi / 360

    def __init__(self, num_envs=1, device="cpu", seed=None, max_episode_steps=None, compile=None):
        super().__init__(num_envs, device, seed, max_episode_steps, compile)
        f32max = np.finfo(np.float32).max
        high = np.array(
            [self.x_threshold * 2, f32max, self.theta_threshold * 2, f32max], dtype=np.float32
        )
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    @classmethod
    def dynamics(cls, state, action):
        # Same equations as gymnasium's CartPoleEnv.step (Euler integration), with the
        # constants folded so that each line is one fused tensor op.
        x, x_dot, theta, theta_dot = state[0], state[1], state[2], state[3]
        m, pml = cls.total_mass, cls.polemass_length
        cos, sin = torch.cos(theta), torch.sin(theta)
        force = action.reshape(-1).to(state.dtype).mul(2 * cls.force_mag / m)
        temp = force.sub_(cls.force_mag / m).addcmul_(theta_dot * theta_dot, sin, value=pml / m)
        denominator = (cos * cos).mul_(-cls.length * cls.masspole / m)
        denominator.add_(cls.length * 4.0 / 3.0)
        theta_acc = torch.addcmul(sin.mul_(cls.gravity), cos, temp, value=-1.0)
        theta_acc.div_(denominator)
        x_acc = torch.addcmul(temp, theta_acc, cos, value=-pml / m)
        x = torch.add(x, x_dot, alpha=cls.tau)
        theta = torch.add(theta, theta_dot, alpha=cls.tau)
        x_dot = torch.add(x_dot, x_acc, alpha=cls.tau)
        theta_dot = torch.add(theta_dot, theta_acc, alpha=cls.tau)
        next_state = torch.stack((x, x_dot, theta, theta_dot))
        terminated = (x.abs() > cls.x_threshold) | (theta.abs() > cls.theta_threshold)
        return next_state, torch.ones_like(theta), terminated


class Pendulum(UniformReset, TorchVecEnv):
    """Pendulum-v1: swing up and hold an inverted pendulum; 200-step limit."""

    env_id = "Pendulum-v1"
    default_max_episode_steps = 200
    state_dim = 2
    reset_low, reset_high = (-math.pi, -1.0), (math.pi, 1.0)
    max_speed, max_torque, dt, g, m, l = 8.0, 2.0, 0.05, 10.0, 1.0, 1.0

    def __init__(self, num_envs=1, device="cpu", seed=None, max_episode_steps=None, compile=None):
        super().__init__(num_envs, device, seed, max_episode_steps, compile)
        high = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Box(-self.max_torque, self.max_torque, (1,), np.float32)

    @classmethod
    def dynamics(cls, state, action):
        th, thdot = state[0], state[1]
        u = action.reshape(-1).to(state.dtype).clamp(-cls.max_torque, cls.max_torque)
        th_norm = torch.remainder(th + math.pi, 2 * math.pi) - math.pi
        cost = th_norm * th_norm + 0.1 * thdot * thdot + 0.001 * u * u
        new_thdot = (
            thdot
            + (3 * cls.g / (2 * cls.l) * torch.sin(th) + 3.0 / (cls.m * cls.l**2) * u) * cls.dt
        )
        new_thdot = new_thdot.clamp(-cls.max_speed, cls.max_speed)
        new_th = th + new_thdot * cls.dt
        return torch.stack((new_th, new_thdot)), -cost, torch.zeros_like(th, dtype=torch.bool)

    @classmethod
    def observe(cls, state):
        th, thdot = state[0], state[1]
        return torch.stack((torch.cos(th), torch.sin(th), thdot), -1)


class MountainCarContinuous(UniformReset, TorchVecEnv):
    """MountainCarContinuous-v0: drive an underpowered car up a hill; 999-step limit."""

    env_id = "MountainCarContinuous-v0"
    default_max_episode_steps = 999
    state_dim = 2
    reset_low, reset_high = (-0.6, 0.0), (-0.4, 0.0)
    min_position, max_position, max_speed, goal_position, power = -1.2, 0.6, 0.07, 0.45, 0.0015

    def __init__(self, num_envs=1, device="cpu", seed=None, max_episode_steps=None, compile=None):
        super().__init__(num_envs, device, seed, max_episode_steps, compile)
        low = np.array([self.min_position, -self.max_speed], dtype=np.float32)
        high = np.array([self.max_position, self.max_speed], dtype=np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    @classmethod
    def dynamics(cls, state, action):
        position, velocity = state[0], state[1]
        a = action.reshape(-1).to(state.dtype)
        force = a.clamp(-1.0, 1.0)
        velocity = velocity + force * cls.power - 0.0025 * torch.cos(3 * position)
        velocity = velocity.clamp(-cls.max_speed, cls.max_speed)
        position = (position + velocity).clamp(cls.min_position, cls.max_position)
        velocity = torch.where(
            (position == cls.min_position) & (velocity < 0), torch.zeros_like(velocity), velocity
        )
        terminated = (position >= cls.goal_position) & (velocity >= 0.0)
        reward = terminated.to(state.dtype) * 100.0 - 0.1 * a * a
        return torch.stack((position, velocity)), reward, terminated


class Acrobot(UniformReset, TorchVecEnv):
    """Acrobot-v1: swing a two-link chain above a line ("book" dynamics, RK4); 500 steps."""

    env_id = "Acrobot-v1"
    default_max_episode_steps = 500
    state_dim = 4
    reset_low, reset_high = (-0.1,) * 4, (0.1,) * 4
    dt = 0.2
    l1, m1, m2, lc1, lc2, moi, g = 1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 9.8
    max_vel_1, max_vel_2 = 4 * math.pi, 9 * math.pi

    def __init__(self, num_envs=1, device="cpu", seed=None, max_episode_steps=None, compile=None):
        super().__init__(num_envs, device, seed, max_episode_steps, compile)
        high = np.array([1.0, 1.0, 1.0, 1.0, self.max_vel_1, self.max_vel_2], dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Discrete(3)

    @classmethod
    def _dsdt(cls, s: Tensor, torque: Tensor) -> Tensor:
        m1, m2, l1, lc1, lc2, i1, i2, g = (
            cls.m1,
            cls.m2,
            cls.l1,
            cls.lc1,
            cls.lc2,
            cls.moi,
            cls.moi,
            cls.g,
        )
        theta1, theta2, dtheta1, dtheta2 = s[0], s[1], s[2], s[3]
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * torch.cos(theta2)) + i1 + i2
        d2 = m2 * (lc2**2 + l1 * lc2 * torch.cos(theta2)) + i2
        phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dtheta2**2 * torch.sin(theta2)
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * torch.sin(theta2)
            + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - math.pi / 2)
            + phi2
        )
        ddtheta2 = (
            torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * torch.sin(theta2) - phi2
        ) / (m2 * lc2**2 + i2 - d2**2 / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return torch.stack((dtheta1, dtheta2, ddtheta1, ddtheta2))

    @classmethod
    def dynamics(cls, state, action):
        torque = action.reshape(-1).to(state.dtype) - 1.0  # {0, 1, 2} -> {-1, 0, +1}
        h = cls.dt
        k1 = cls._dsdt(state, torque)
        k2 = cls._dsdt(state + h / 2 * k1, torque)
        k3 = cls._dsdt(state + h / 2 * k2, torque)
        k4 = cls._dsdt(state + h * k3, torque)
        ns = state + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        # gymnasium's wrap() shifts by whole turns into [-pi, pi]; remainder does the same.
        angles = ns[:2]
        wrapped = torch.where(
            (angles > math.pi) | (angles < -math.pi),
            torch.remainder(angles + math.pi, 2 * math.pi) - math.pi,
            angles,
        )
        ns = torch.cat(
            (
                wrapped,
                ns[2:3].clamp(-cls.max_vel_1, cls.max_vel_1),
                ns[3:4].clamp(-cls.max_vel_2, cls.max_vel_2),
            )
        )
        terminated = -torch.cos(ns[0]) - torch.cos(ns[1] + ns[0]) > 1.0
        reward = terminated.to(state.dtype) - 1.0
        return ns, reward, terminated

    @classmethod
    def observe(cls, state):
        t1, t2, d1, d2 = state[0], state[1], state[2], state[3]
        return torch.stack((torch.cos(t1), torch.sin(t1), torch.cos(t2), torch.sin(t2), d1, d2), -1)


NATIVE_ENVS: dict[str, type[TorchVecEnv]] = {
    cls.env_id: cls for cls in (CartPole, Pendulum, MountainCarContinuous, Acrobot)
}
