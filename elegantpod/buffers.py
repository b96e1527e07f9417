"""Rollout and replay storage on preallocated device tensors.

Both allocate once, at construction, and afterwards only copy into slices: no Python
object is created per transition, and on a GPU nothing leaves the device.
"""

from __future__ import annotations

import dataclasses

import torch

from elegantpod.types import Batch

Tensor = torch.Tensor


def _empty(shape, dtype, device) -> Tensor:
    return torch.zeros(shape, dtype=dtype, device=device)


class RolloutBuffer:
    """Time-major ``(T, N, ...)`` storage for one rollout of ``horizon`` vector steps."""

    def __init__(self, horizon: int, num_envs: int, obs_shape, action_shape, action_dtype, device):
        T, N = int(horizon), int(num_envs)
        self.horizon, self.num_envs = T, N
        self.obs = _empty((T, N, *obs_shape), torch.float32, device)
        self.next_obs = _empty((T, N, *obs_shape), torch.float32, device)
        self.action = _empty((T, N, *action_shape), action_dtype, device)
        self.reward = _empty((T, N), torch.float32, device)
        self.terminated = _empty((T, N), torch.bool, device)
        self.truncated = _empty((T, N), torch.bool, device)

    def write(self, t: int, obs, action, reward, next_obs, terminated, truncated) -> None:
        """Store vector step ``t``."""
        self.obs[t].copy_(obs)
        self.action[t].copy_(action)
        self.reward[t].copy_(reward)
        self.next_obs[t].copy_(next_obs)
        self.terminated[t].copy_(terminated)
        self.truncated[t].copy_(truncated)

    def batch(self) -> Batch:
        """The stored rollout as a time-major :class:`Batch` (views, no copy)."""
        return Batch(
            self.obs, self.action, self.reward, self.next_obs, self.terminated, self.truncated
        )


class ReplayBuffer:
    """A ring of the last ``capacity`` transitions, sampled uniformly.

    Parameters
    ----------
    capacity
        Maximum transitions kept; the oldest are overwritten first.
    obs_shape, action_shape
        Shapes of one observation and one action.
    device
        Where storage lives (and where samples are returned).
    generator
        Torch generator for sampling indices (seeded by the pod).
    action_dtype
        How actions are stored (``int64`` for discrete ones).
    obs_dtype
        How observations are stored: ``uint8`` keeps images as the bytes they are, a
        quarter of float32's memory. Samples hold float32 observations either way.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape,
        action_shape,
        device,
        generator=None,
        action_dtype=torch.float32,
        obs_dtype=torch.float32,
    ):
        if int(capacity) < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity!r}")
        C = int(capacity)
        self.capacity, self.device, self.generator = C, torch.device(device), generator
        self.obs = _empty((C, *obs_shape), obs_dtype, device)
        self.next_obs = _empty((C, *obs_shape), obs_dtype, device)
        self.action = _empty((C, *action_shape), action_dtype, device)
        self.reward = _empty((C,), torch.float32, device)
        self.terminated = _empty((C,), torch.bool, device)
        self.truncated = _empty((C,), torch.bool, device)
        self.ptr = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def extend(self, batch: Batch) -> None:
        """Append a flat batch, wrapping around the end of the ring."""
        n = len(batch)
        if n > self.capacity:  # only the newest `capacity` rows can survive
            batch = Batch(*(getattr(batch, k)[n - self.capacity :] for k in _FIELDS))
            n = self.capacity
        first = min(n, self.capacity - self.ptr)
        for k in _FIELDS:
            src, dst = getattr(batch, k), getattr(self, k)
            dst[self.ptr : self.ptr + first].copy_(src[:first])
            if first < n:
                dst[: n - first].copy_(src[first:])
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def contents(self) -> dict[str, Tensor]:
        """The stored transitions, oldest first (copies; for checkpoints)."""
        if self.size < self.capacity:
            order = slice(0, self.size)
            return {k: getattr(self, k)[order].clone() for k in _FIELDS}
        idx = (torch.arange(self.capacity, device=self.device) + self.ptr) % self.capacity
        return {k: getattr(self, k)[idx] for k in _FIELDS}

    def clear(self) -> None:
        """Forget every stored transition (the storage stays allocated)."""
        self.ptr, self.size = 0, 0

    def restore(self, contents: dict[str, Tensor]) -> None:
        """Replace the stored transitions with ``contents`` (as from :meth:`contents`)."""
        self.clear()
        batch = Batch(*(contents[k].to(self.device) for k in _FIELDS))
        if len(batch):
            self.extend(batch)

    def sample(self, batch_size: int) -> Batch:
        """Draw ``batch_size`` stored transitions uniformly with replacement."""
        if self.size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = torch.randint(
            0, self.size, (int(batch_size),), device=self.device, generator=self.generator
        )
        out = Batch(*(getattr(self, k)[idx] for k in _FIELDS))
        if out.obs.dtype != torch.float32:
            out = dataclasses.replace(out, obs=out.obs.float(), next_obs=out.next_obs.float())
        return out


_FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")
