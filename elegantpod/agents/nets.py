"""Network building blocks shared by the learners.

Every block takes the ``device`` to build on and the ``generator`` to draw its initial
weights from (a learner's own): initialising from torch's process-wide RNG would let
pods that share a process (a Dask worker's threads) change each other's networks.
"""

from __future__ import annotations

import math

import torch
from torch import nn

Tensor = torch.Tensor


def mlp(
    sizes: list[int],
    activation: type[nn.Module] = nn.Tanh,
    out_gain: float = 1.0,
    *,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
) -> nn.Sequential:
    """A multilayer perceptron with orthogonal init (the PPO-paper recipe).

    ``generator`` (on ``device``) draws the weights; ``None``: torch's global RNG.
    """
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        # skip_init: nn.Linear's own init would draw from the global RNG, then be overwritten
        linear = nn.utils.skip_init(nn.Linear, sizes[i], sizes[i + 1], device=device or "cpu")
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, out_gain if last else math.sqrt(2), generator=generator)
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(activation())
    return nn.Sequential(*layers)


class RunningNorm(nn.Module):
    """Observation normalizer with running mean/variance (parallel Welford update).

    Its statistics are buffers, so they travel with ``state_dict`` into checkpoints.
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, enabled: bool = True):
        super().__init__()
        self.enabled, self.clip = enabled, clip
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.tensor(1e-4))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Fold a batch of observations into the running mean and variance."""
        if not self.enabled:
            return
        x = x.reshape(-1, *self.mean.shape)
        batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + n
        self.mean += delta * n / total
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        return ((x - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-self.clip, self.clip)


class EnsembleLinear(nn.Module):
    """``k`` independent linear layers applied as one batched matmul.

    Twin critics written this way cost one kernel per layer instead of two, which is
    what matters for small networks where launch overhead dominates.
    """

    def __init__(self, k: int, in_features: int, out_features: int, *, device=None, generator=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(k, in_features, out_features, device=device))
        self.bias = nn.Parameter(torch.empty(k, 1, out_features, device=device))
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound, generator=generator)
        nn.init.uniform_(self.bias, -bound, bound, generator=generator)

    def forward(self, x: Tensor) -> Tensor:
        """``x``: ``(k, B, in)`` or ``(B, in)`` (broadcast to all members) -> ``(k, B, out)``."""
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.weight.shape[0], -1, -1)
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleQ(nn.Module):
    """``k`` Q-networks ``Q_i(s, a)`` evaluated together: returns ``(k, B)``."""

    def __init__(
        self,
        k: int,
        obs_dim: int,
        act_dim: int,
        hidden: tuple[int, ...],
        *,
        device=None,
        generator=None,
    ):
        super().__init__()
        sizes = [obs_dim + act_dim, *hidden, 1]
        layers: list[nn.Module] = []
        for i in range(len(sizes) - 1):
            layers.append(
                EnsembleLinear(k, sizes[i], sizes[i + 1], device=device, generator=generator)
            )
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        return self.net(torch.cat((obs, action), -1)).squeeze(-1)
