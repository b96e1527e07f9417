"""Counter-based uniform noise: reset draws that need no generator state.

Why: a fused env step (:func:`~elegantpod.envs.fused_step.whole_step`) draws the initial
states of the episodes that end inside its compiled region; a ``torch.Generator`` cannot
go there, and its Mersenne Twister costs more on CPU than this hash (see
``benchmarks/README.md``, ``env_throughput.py``).
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor

_M32 = 0xFFFFFFFF


def _mix32(x: Tensor) -> Tensor:
    """A 32-bit integer finalizer (xor-shift-multiply), on int64 lanes masked to 32 bits.

    The multipliers are odd and below 2**31, so no product leaves int64's range: signed
    overflow would be undefined behaviour in Inductor's C++.
    """
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x2C1B3C6D) & _M32
    return x ^ (x >> 16)


def uniform_noise(shape: tuple[int, int], key: Tensor, draws: Tensor) -> Tensor:
    """Uniforms in [0, 1) for draw number ``draws`` of stream ``key``: float32 with 24
    random bits, a pure function of its inputs.

    Counter-based, like JAX's and Philox's generators: every element hashes its own
    index, the draw counter and the key, so the noise needs no generator state, is the
    same compiled or not, and fuses into the step's kernel.
    """
    d, n = shape
    index = torch.arange(d * n, device=key.device, dtype=torch.int64).view(d, n)
    x = _mix32(((index + draws * (d * n)) & _M32) ^ key)
    return (x >> 8).to(torch.float32) * (1.0 / 16777216.0)
