"""Exploration noise that is correlated in time, one process per sub-env.

Why: i.i.d. Gaussian action noise averages out within a few steps, so a car that must
rock back and forth to climb a hill (MountainCarContinuous) rarely gets anywhere, while
noise that stays on one side for a while does. Eberhard et al. ("Pink Noise Is All You
Need", ICLR 2023) found pink noise (power spectral density ``S(f) ∝ f^-1``) a good
default between white noise (``beta = 0``) and Brownian, red noise (``beta = 2``). The
kind and its exponent are hyperparameters, so a tournament's generator can search them.

Every process draws unit-variance values ``n_t`` of shape ``(num_envs, act_dim)``, one
independent sequence per sub-env and action dimension, from the learner's own
``torch.Generator``, so a checkpointed generator makes a resumed pod draw the same noise:

- ``"gaussian"``: i.i.d. ``N(0, 1)``, exactly the draws the learners made before noise
  became a hyperparameter (the default, bit for bit);
- ``"ou"``: Ornstein-Uhlenbeck, sampled exactly, ``x_{t+1} = a x_t + sqrt(1 - a^2) eps``
  with ``a = exp(-theta)``; it starts stationary, ``x_0 ~ N(0, 1)``, and its
  autocorrelation at lag ``k`` is ``exp(-theta k)``;
- ``"colored"``: power-law noise ``S(f) ∝ f^-beta`` by the method of Timmer & König
  (1995): Gaussian Fourier coefficients scaled by ``f^(-beta/2)``, an inverse real FFT,
  divided by the process's standard deviation. One sequence of :data:`SEQ_LEN` steps per
  sub-env and action dimension is made at once and consumed one step at a time.

A sub-env whose episode ends restarts its process (OU: a fresh stationary draw;
colored: a fresh sequence from position 0), so each episode explores anew; the others
continue. Restarts cost no host synchronisation: they only mark the sub-envs, and the
next :meth:`NoiseProcess.sample` acts on the marks.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from elegantpod.agents.hparams import hparam
from elegantpod.checks.limits import Limit
from elegantpod.checks.text import short
from elegantpod.search.space import Bound, Choice

Tensor = torch.Tensor

NOISE_KINDS = ("gaussian", "ou", "colored")
"""The exploration noise processes a learner may use (``noise=``)."""
PARAMS = {"gaussian": (), "ou": ("theta",), "colored": ("beta",)}
"""The hyperparameters each kind depends on and records in its state (``noise_<name>``)."""
SEQ_LEN = 1000
"""Steps of one colored-noise sequence: the longest episode of the classic tasks and of
Gym's MuJoCo ones (1000; MountainCarContinuous: 999), so that its lowest frequency spans
an episode, as in the paper. A learner does not know its env's episode limit; in shorter
episodes (Pendulum: 200) each episode sees the start of a sequence, whose slowest
components then look like a drift. Memory: ``num_envs * act_dim * SEQ_LEN`` floats, in
checkpoints too."""


@dataclass(frozen=True, kw_only=True)
class NoiseConfig:
    """The exploration noise hyperparameters of DDPG, TD3 and SAC (a config mixin).

    Put it first among a config's bases: its :meth:`validate` runs the other base's
    checks, then its own.
    """

    noise: str = hparam("gaussian", search=Choice(list(NOISE_KINDS), prob=0.3))
    """Exploration noise process: ``"gaussian"`` (i.i.d.), ``"ou"`` (Ornstein-Uhlenbeck)
    or ``"colored"`` (power law, ``noise_beta``); each restarts when its sub-env's
    episode ends."""
    noise_beta: float = hparam(1.0, limit=Limit(0.0, 3.0), search=Bound(0.0, 2.0))
    """Exponent of colored noise, ``S(f) ∝ f^-beta``: 0 white, 1 pink, 2 red (Brownian)."""
    noise_theta: float = hparam(0.15, limit=Limit(0.0, 1.0, open_low=True, domain=True))
    """Mean reversion of OU noise per env step: its autocorrelation at lag ``k`` is
    ``exp(-theta k)``."""

    def validate(self) -> None:
        """The other base's checks, then ``ValueError`` naming an unknown noise kind."""
        super().validate()  # type: ignore[misc]
        check_kind("noise", self.noise)


def check_kind(name: str, kind: Any) -> None:
    """Raise ``ValueError`` naming ``name`` and ``kind`` unless it is in :data:`NOISE_KINDS`."""
    if not isinstance(kind, str) or kind not in NOISE_KINDS:
        raise ValueError(f"{name} must be one of {', '.join(NOISE_KINDS)}; got {short(kind)}")


# -- the processes --------------------------------------------------------------------------
class NoiseProcess:
    """Unit-variance noise of shape ``(num_envs, act_dim)``, one row per sub-env.

    State tensors are replaced rather than changed in place, so that a process made
    inside ``torch.inference_mode`` (a worker's rollout) still works outside it, and a
    returned sample is never changed later. (Colored noise's large buffer is the
    exception: a normal tensor, changed in place.)
    """

    kind: ClassVar[str]

    def __init__(self, shape: tuple[int, int], generator: torch.Generator):
        self.shape = shape
        self.generator = generator
        self.device = generator.device

    def _randn(self, *shape: int) -> Tensor:
        return torch.randn(shape, device=self.device, generator=self.generator)

    def sample(self) -> Tensor:
        """The next value of every sub-env's process: ``(num_envs, act_dim)``."""
        raise NotImplementedError

    def restart(self, done: Tensor | None) -> None:
        """Restart the sub-envs where ``done`` (``(num_envs,)`` bools) is true; ``None``:
        all of them. Only marks them: the next :meth:`sample` draws."""

    def params(self) -> dict[str, Any]:
        """The hyperparameters this process was made for (:data:`PARAMS` of its kind)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Kind, hyperparameters and state tensors (weights_only-safe)."""
        return {"kind": self.kind, **self.params()}

    def load_tensors(self, state: dict[str, Any]) -> None:
        """Take the state tensors of a checked :meth:`state_dict` (see
        :meth:`ExplorationNoise.checked`)."""


class GaussianNoise(NoiseProcess):
    """I.i.d. ``N(0, 1)``: no state, nothing to restart."""

    kind = "gaussian"

    def sample(self) -> Tensor:
        return self._randn(*self.shape)


class OUNoise(NoiseProcess):
    """Ornstein-Uhlenbeck noise with unit stationary variance, sampled exactly."""

    kind = "ou"

    def __init__(self, shape, generator, theta: float):
        super().__init__(shape, generator)
        self.theta = float(theta)
        self.a = math.exp(-self.theta)
        self.s = math.sqrt(1.0 - self.a * self.a)
        self.x = torch.zeros(shape, device=self.device)
        self.fresh = torch.ones(shape[0], dtype=torch.bool, device=self.device)
        """Sub-envs whose next value is a fresh stationary draw (made at a restart)."""

    def sample(self) -> Tensor:
        eps = self._randn(*self.shape)
        # a restarted row takes eps itself: N(0, 1), the stationary distribution
        self.x = torch.where(self.fresh[:, None], eps, self.a * self.x + self.s * eps)
        self.fresh = torch.zeros_like(self.fresh)
        return self.x

    def restart(self, done):
        self.fresh = (
            torch.ones_like(self.fresh) if done is None else self.fresh | done.to(self.device)
        )

    def params(self):
        return {"theta": self.theta}

    def state_dict(self):
        return {**super().state_dict(), "x": self.x.clone(), "fresh": self.fresh.clone()}

    def load_tensors(self, state):
        self.x, self.fresh = state["x"], state["fresh"]


class ColoredNoise(NoiseProcess):
    """Power-law noise ``S(f) ∝ f^-beta``, a sequence of ``seq_len`` steps at a time."""

    kind = "colored"

    def __init__(self, shape, generator, beta: float, seq_len: int = SEQ_LEN):
        super().__init__(shape, generator)
        self.beta, self.seq_len = float(beta), int(seq_len)
        with torch.inference_mode(False):  # changed in place, also outside inference mode
            self.sequences = torch.zeros((shape[0], self.seq_len, shape[1]), device=self.device)
        """``(num_envs, seq_len, act_dim)``: each sub-env's current sequences, a step's
        values side by side (one read per sub-env and step). The one state tensor changed
        in place: a copy per refill would cost the whole buffer."""
        self.position = torch.full((shape[0],), self.seq_len, device=self.device, dtype=torch.long)
        """Each sub-env's next step in its sequence; ``seq_len``: used up (a fresh one next)."""
        self._starts = torch.arange(shape[0], device=self.device) * self.seq_len
        """Where each sub-env's sequence starts in the flattened buffer."""

    def sample(self) -> Tensor:
        # the only host synchronisation (on a GPU): which rows need a fresh sequence
        used_up = (self.position >= self.seq_len).nonzero().squeeze(1)
        if used_up.numel():
            fresh = powerlaw_noise(
                (used_up.numel(), self.shape[1]), self.seq_len, self.beta, self.generator
            )
            self.sequences.index_put_((used_up,), fresh.transpose(1, 2))
            self.position = self.position.index_put((used_up,), torch.zeros_like(used_up))
        # one contiguous read of act_dim values per sub-env (cheaper than 2-d indexing)
        flat = self.sequences.view(-1, self.shape[1])
        out = flat.index_select(0, self._starts + self.position)
        self.position = self.position + 1
        return out

    def restart(self, done):
        if done is None:
            self.position = torch.full_like(self.position, self.seq_len)
        else:
            self.position = torch.where(done.to(self.device), self.seq_len, self.position)

    def params(self):
        return {"beta": self.beta}

    def state_dict(self):
        return {
            **super().state_dict(),
            "sequences": self.sequences.clone(),
            "position": self.position.clone(),
        }

    def load_tensors(self, state):
        with torch.inference_mode(False):
            self.sequences = state["sequences"].clone(memory_format=torch.contiguous_format)
        self.position = state["position"]
        self.seq_len = int(self.sequences.shape[1])
        self._starts = torch.arange(self.shape[0], device=self.device) * self.seq_len


def powerlaw_noise(
    shape: tuple[int, ...], seq_len: int, beta: float, generator: torch.Generator
) -> Tensor:
    """Gaussian sequences with power spectral density ``S(f) ∝ f^-beta`` (Timmer & König).

    Each of the ``shape`` sequences of ``seq_len`` steps gets independent complex
    Gaussian Fourier coefficients ``X_k`` with ``E|X_k|^2 ∝ f_k^-beta`` (``f_k = k /
    seq_len``; the mean's coefficient ``X_0`` takes the lowest frequency's scale, ``f_1``,
    where ``f^-beta`` is infinite). ``x = irfft(X)`` is then divided by its exact standard
    deviation, so every step of every sequence is ``N(0, 1)``. With ``beta = 0`` this is
    i.i.d. white noise.

    Returns
    -------
    Tensor
        ``(*shape, seq_len)`` float32 on the generator's device.
    """
    re_scale, im_scale, std = (x.to(generator.device) for x in _spectrum(seq_len, beta))
    z = torch.randn((*shape, 2, re_scale.numel()), device=generator.device, generator=generator)
    coeffs = torch.complex(z[..., 0, :] * re_scale, z[..., 1, :] * im_scale)
    return torch.fft.irfft(coeffs, n=seq_len) / std


@functools.lru_cache(maxsize=64)
def _spectrum(seq_len: int, beta: float) -> tuple[Tensor, Tensor, Tensor]:
    """Scales of the real and imaginary parts of the Fourier coefficients, and the
    standard deviation of their inverse transform (float32, on the CPU: made once)."""
    n_freq = seq_len // 2 + 1
    f = torch.arange(n_freq, dtype=torch.float64) / seq_len
    f[0] = 1.0 / seq_len
    w = f.pow(-beta / 2.0)
    # The coefficients of the mean (and, for an even length, of the Nyquist frequency)
    # are real, so their real part carries all of E|X|^2 = 2 w^2: a sqrt(2) larger scale.
    real_only = torch.zeros(n_freq, dtype=torch.bool)
    real_only[0] = True
    real_only[-1] = seq_len % 2 == 0
    re_scale = torch.where(real_only, w * math.sqrt(2.0), w)
    im_scale = torch.where(real_only, torch.zeros_like(w), w)
    # x_t = (1/L) sum_k X_k e^{2 pi i k t / L} over all L bins (Hermitian): each bin of
    # E|X|^2 = 2 w^2 adds 2 w^2 / L^2 to Var(x_t), a complex one counted twice.
    weight = torch.where(real_only, 1.0, 2.0)
    std = (2.0 * weight * w.square()).sum().sqrt() / seq_len
    return re_scale.float(), im_scale.float(), std.float()


def make_process(
    kind: str, shape: tuple[int, int], generator: torch.Generator, *, beta: float, theta: float
) -> NoiseProcess:
    """A fresh process of ``kind`` for ``shape = (num_envs, act_dim)``."""
    if kind == "ou":
        return OUNoise(shape, generator, theta)
    if kind == "colored":
        return ColoredNoise(shape, generator, beta)
    return GaussianNoise(shape, generator)


# -- what a learner holds -------------------------------------------------------------------
class ExplorationNoise:
    """A learner's exploration noise: the process its config names, made lazily.

    The process is made at the first :meth:`sample` (its number of sub-envs is the
    observation batch's), and made anew when the batch size or the hyperparameters
    change (:meth:`configure`, from ``set_hparams``).
    """

    def __init__(self, config: NoiseConfig, generator: torch.Generator):
        self.generator = generator
        self.process: NoiseProcess | None = None
        self.kind, self.beta, self.theta = "", math.nan, math.nan
        self.configure(config)

    def configure(self, config: NoiseConfig) -> None:
        """Follow ``config``'s noise hyperparameters: another kind, or another value of
        the kind's own parameter (``noise_beta`` of colored noise, ``noise_theta`` of
        OU noise), starts a fresh process."""
        before = self._signature()
        self.kind, self.beta, self.theta = (
            config.noise,
            float(config.noise_beta),
            float(config.noise_theta),
        )
        if self._signature() != before:
            self.process = None

    def _signature(self) -> tuple:
        return (self.kind, *(getattr(self, k) for k in PARAMS.get(self.kind, ())))

    def sample(self, n: int, act_dim: int) -> Tensor:
        """The next noise value of ``n`` sub-envs: ``(n, act_dim)``, unit variance."""
        if self.process is None or self.process.shape != (n, act_dim):
            self.process = make_process(
                self.kind, (n, act_dim), self.generator, beta=self.beta, theta=self.theta
            )
        return self.process.sample()

    def restart(self, done: Tensor | None) -> None:
        """Restart the sub-envs whose episodes ended (``None``: all of them)."""
        if self.process is None:
            return
        if done is not None and tuple(done.shape) != self.process.shape[:1]:
            self.process = None  # made for another batch of sub-envs: stale anyway
            return
        self.process.restart(done)

    def state_dict(self) -> dict[str, Any] | None:
        """The process's state, or ``None`` before the first sample."""
        return None if self.process is None else self.process.state_dict()

    def checked(self, state: Any, act_dim: int) -> NoiseProcess | None:
        """The process a saved ``state`` describes, or ``None`` (start fresh) for no
        state, Gaussian noise (stateless) or a process of another kind or other
        hyperparameters than the learner's config (switched since, as by ``set_hparams``).

        Raises
        ------
        ValueError
            Naming the field (``noise.kind``, ``noise.position``...) that is malformed.
        """
        if state is None:
            return None
        if not isinstance(state, dict):
            raise ValueError(f"noise must be a dict or None, got {type(state).__name__}")
        check_kind("noise.kind", state.get("kind"))
        kind = state["kind"]
        for key in PARAMS[kind]:
            saved = state.get(key)
            if isinstance(saved, bool) or not isinstance(saved, int | float):
                raise ValueError(f"noise.{key} must be a number, got {short(saved)}")
        if kind != self.kind or any(float(state[k]) != getattr(self, k) for k in PARAMS[kind]):
            return None
        if kind == "gaussian":
            return None
        tensors = _checked_tensors(kind, state, act_dim, self.generator.device)
        n = next(iter(tensors.values())).shape[0]
        process = make_process(kind, (n, act_dim), self.generator, beta=self.beta, theta=self.theta)
        process.load_tensors(tensors)
        return process


MAX_SEQ_LEN = 1_000_000
"""Hard limit of a saved colored-noise sequence's length (a hostile file's shape)."""


def _checked_tensors(kind: str, state: dict, act_dim: int, device) -> dict[str, Tensor]:
    """The state tensors of a saved OU or colored process, checked and on ``device``."""
    names = {"ou": ("x", "fresh"), "colored": ("sequences", "position")}[kind]
    out = {}
    for name in names:
        t = state.get(name)
        if not isinstance(t, Tensor):
            raise ValueError(f"noise.{name} must be a tensor, got {short(t)}")
        out[name] = t.detach().to(device).clone()
    n = out[names[0]].shape[0] if out[names[0]].dim() else 0
    if kind == "ou":
        x, fresh = out["x"], out["fresh"]
        _expect(x, "x", (n, act_dim), torch.float32, n)
        _expect(fresh, "fresh", (n,), torch.bool, n)
        if not torch.isfinite(x).all():
            raise ValueError("noise.x must be finite")
    else:
        seq, pos = out["sequences"], out["position"]
        length = seq.shape[1] if seq.dim() == 3 else 0
        if not 2 <= length <= MAX_SEQ_LEN:
            raise ValueError(
                f"noise.sequences must be (num_envs, steps, {act_dim}) with 2 to "
                f"{MAX_SEQ_LEN:,} steps, got shape {tuple(seq.shape)}"
            )
        _expect(seq, "sequences", (n, length, act_dim), torch.float32, n)
        _expect(pos, "position", (n,), torch.int64, n)
        if not torch.isfinite(seq).all():
            raise ValueError("noise.sequences must be finite")
        if bool(((pos < 0) | (pos > length)).any()):
            raise ValueError(f"noise.position must lie in [0, {length}]")
    return out


def _expect(t: Tensor, name: str, shape: tuple, dtype: torch.dtype, n: int) -> None:
    if n < 1 or tuple(t.shape) != shape or t.dtype != dtype:
        raise ValueError(
            f"noise.{name} must be a {dtype} tensor of shape {shape} (num_envs >= 1), "
            f"got {t.dtype} {tuple(t.shape)}"
        )
