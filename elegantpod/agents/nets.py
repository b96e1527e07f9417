"""Network building blocks shared by the learners.

Every block takes the ``device`` to build on and the ``generator`` to draw its initial
weights from (a learner's own): initialising from torch's process-wide RNG would let
pods that share a process (a Dask worker's threads) change each other's networks.

Observations are vectors, or images: an observation of three dimensions is an image of
pixel values 0..255 (height, width, channels, as gymnasium gives them; channels first
where the first dimension has at most 4 and the last more). A learner that takes
images (:attr:`~elegantpod.agents.base.Learner.takes_images`: PPO and DQN) puts an
:class:`ImageEncoder` before its perceptron (:func:`encoded`), as SB3's ``CnnPolicy``
does; its observation normaliser stays off for images, which the encoder scales.
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


def mlp_params(widths) -> int:
    """Weights and biases of an :func:`mlp` of layer ``widths`` (inputs first)."""
    widths = [int(w) for w in widths]
    return sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))


def mlp_working_bytes(widths, rows: int, networks: int) -> int:
    """Bytes ``networks`` MLPs of layer ``widths`` hold while updating on ``rows`` rows:
    float32 weights, gradients and two Adam moments (16 bytes a parameter), and the
    activations of a forward and backward pass (8 bytes a row and unit)."""
    return networks * (16 * mlp_params(widths) + 8 * int(rows) * sum(int(w) for w in widths))


def is_image(obs_shape: tuple[int, ...]) -> bool:
    """Whether observations of ``obs_shape`` are images (see the module docstring)."""
    return len(obs_shape) == 3


IMAGE_FEATURES = 256
"""Width of an :class:`ImageEncoder`'s output: the features its perceptron reads."""

NATURE_MIN_SIDE = 36
"""Smallest image side the Nature-DQN convolutions (8/4, 4/2, 3/1) fit; smaller images
get two 3x3 convolutions instead."""


class ImageEncoder(nn.Module):
    """Pixels ``(..., H, W, C)`` (values 0..255) -> ``(..., IMAGE_FEATURES)`` features.

    Why these layers: the convolutions of the Nature DQN paper (Mnih et al. 2015: 32
    8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1), which Atari-scale agents and SB3's
    ``NatureCNN`` use, for images of :data:`NATURE_MIN_SIDE` pixels or more; smaller
    images (grid worlds, 10x10 frames) would vanish under an 8x8 stride-4 kernel, so
    they get two padded 3x3 convolutions (16 channels, then 32 at stride 2). A linear
    layer and a ReLU make the features. Weights are orthogonal with gain sqrt(2), as
    the perceptrons'. Pixels are divided by 255 inside, so an exported policy takes
    raw frames.
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        features: int = IMAGE_FEATURES,
        *,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if not is_image(obs_shape) or min(obs_shape) < 1:
            raise ValueError(f"an image is (height, width, channels), got {obs_shape}")
        self.obs_shape = tuple(int(d) for d in obs_shape)
        a, b, c = self.obs_shape
        self.channels_first = a <= 4 < c
        channels, height, width = (a, b, c) if self.channels_first else (c, a, b)
        if min(height, width) >= NATURE_MIN_SIDE:
            plan = [(32, 8, 4, 0), (64, 4, 2, 0), (64, 3, 1, 0)]
        else:
            plan = [(16, 3, 1, 1), (32, 3, 2, 1)]
        layers: list[nn.Module] = []
        dev = device or "cpu"
        for out, kernel, stride, pad in plan:
            conv = nn.utils.skip_init(
                nn.Conv2d, channels, out, kernel, stride=stride, padding=pad, device=dev
            )
            nn.init.orthogonal_(conv.weight, math.sqrt(2), generator=generator)
            nn.init.zeros_(conv.bias)
            layers += [conv, nn.ReLU()]
            channels = out
            height = (height + 2 * pad - kernel) // stride + 1
            width = (width + 2 * pad - kernel) // stride + 1
        linear = nn.utils.skip_init(nn.Linear, channels * height * width, features, device=dev)
        nn.init.orthogonal_(linear.weight, math.sqrt(2), generator=generator)
        nn.init.zeros_(linear.bias)
        self.conv = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), linear, nn.ReLU())
        self.features = features

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-3]
        x = x.reshape(-1, *self.obs_shape).to(torch.float32) * (1.0 / 255.0)
        if not self.channels_first:
            x = x.permute(0, 3, 1, 2)
        return self.head(self.conv(x)).reshape(*lead, self.features)


def encoded(obs_shape: tuple[int, ...], sizes: list[int], **mlp_kwargs) -> nn.Module:
    """``mlp(sizes)`` reading observations of ``obs_shape``: the perceptron itself for
    vectors (``sizes[0]`` their width), or ``Sequential(ImageEncoder, mlp)`` for images,
    the perceptron then reading the encoder's features instead of ``sizes[0]``."""
    if not is_image(obs_shape):
        return mlp(sizes, **mlp_kwargs)
    rng = {k: mlp_kwargs[k] for k in ("device", "generator") if k in mlp_kwargs}
    encoder = ImageEncoder(obs_shape, **rng)
    return nn.Sequential(encoder, mlp([encoder.features, *sizes[1:]], **mlp_kwargs))


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
