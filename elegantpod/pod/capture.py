"""Whole PPO iterations replayed as CUDA graphs: rollout and update without Python.

Why: on a GPU an eager PPO iteration is bound by the host, not the device: it launches
thousands of small kernels from Python, one by one, where end-to-end-compiled JAX PPO
launches a few (figures: ``benchmarks/README.md``, ``gpu_frontier.py``). A CUDA graph
records those launches once and replays them with one call.

:class:`IterationGraphs` captures two graphs per pod:

- **rollout**: ``horizon`` vector steps of policy forward, action sampling, the env's
  fused step (:func:`elegantpod.envs.base.whole_step`, itself one compiled kernel) and
  the buffer writes, then copies of the env's and collector's carried tensors back into
  the tensors the graph reads, so that each replay continues where the last one ended;
- **update**: GAE, every epoch's permutation and minibatch gradient steps (loss,
  backward, gradient clipping, Adam with ``capturable=True`` reading a tensor learning
  rate) and the observation normalizer's update, summing the statistics into a device
  tensor that is read once per iteration.

Both record the very functions the eager path runs (:meth:`Collector.rollout
<elegantpod.pod.collector.Collector.rollout>`, :meth:`PPO.update_static
<elegantpod.agents.ppo.PPO.update_static>`), so a replay computes what an eager
iteration computes from the same state, including the random draws: the learner's and
the env's generators are registered with each graph and advance as they would eagerly.

A graph holds the addresses of every tensor it touches and the Python constants of
its kernels. Anything that replaces one of those tensors (a checkpoint load, a rebuilt
optimizer) or changes a constant (a new clipping range, discount or entropy weight) is
noticed through :meth:`IterationGraphs.fingerprint` before the next replay and the graphs
are captured again. The learning rate is no constant: Adam reads it from a device tensor
that a new ``lr`` changes in place. Tensors the pod reassigns as it runs (the env's
state after a reset, the collector's observation) are copied into the graph's own before a
replay instead, so a restart of the pod's episodes keeps its graphs.

The first iteration after a (re)capture runs eagerly on a side stream: it warms up
lazily initialised CUDA state (cuBLAS handles, compiled kernels) as CUDA graphs
require, and trains like any other iteration. A capture is paid for by the replays that
follow it, so it is made only when at least :data:`MIN_CAPTURE_ITERATIONS` iterations
remain (:func:`should_capture`). If capturing fails, the pod warns once and stays eager.

Every iteration on this path, eager or captured, hands the env's compiled step carried
tensors of one kind, inference tensors: dynamo compiles plain and inference tensors
apart, and a rollout of one step (``horizon=1``) would otherwise meet the inference
variant first inside the capture, where a compile fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import torch

Tensor = torch.Tensor


MIN_CAPTURE_ITERATIONS = 2
"""Iterations that must remain for a capture to pay: the warm-up iteration that precedes
it, and at least one replay of what it captured."""


def should_capture(iterations_left: int | None, minimum: int = MIN_CAPTURE_ITERATIONS) -> bool:
    """Whether to warm up and capture now, with ``iterations_left`` iterations (this one
    included) left in the run; ``None``: unknown (a time budget), capture.

    A capture costs about one eager iteration and replays nothing by itself; a segment
    of one iteration would pay for it and never use it.
    """
    return iterations_left is None or iterations_left >= minimum


_capture_lock = threading.Lock()
_streams: dict[str, tuple[Any, Any]] = {}
_streams_lock = threading.Lock()  # apart: captures hold _capture_lock while asking


def _pod_streams(device: torch.device) -> tuple[Any, Any]:
    """One warm-up and one capture stream per device, made once per process: streams
    from ``torch.cuda.Stream()`` come round-robin from a pool, so a fresh one can be the
    very stream another pod is capturing on; and a capture must run on the pod's own
    device, not on the thread's current one."""
    with _streams_lock:
        key = str(device)
        if key not in _streams:
            _streams[key] = (torch.cuda.Stream(device), torch.cuda.Stream(device))
        return _streams[key]


STATIC_UPDATE = ("use_static_update", "update_static", "STAT_KEYS")
"""What a learner offers for its iterations to be captured (PPO does): a switch to an
update whose tensors stay in place, the update itself (``update_static(batch, sums)``:
statistics summed on the device, the count of gradient steps returned) and the names of
those statistics. Any learner with all three is captured like PPO; none is named here."""


def unsupported(collector: Any, learner: Any) -> str | None:
    """Why this pod's iterations cannot be captured, or ``None`` when they can."""
    from elegantpod.envs.base import TorchVecEnv

    missing = [name for name in STATIC_UPDATE if not hasattr(learner, name)]
    if missing:
        return (
            f"{type(learner).__name__} has no static update to capture (it lacks "
            f"{', '.join(missing)}; PPO has one)"
        )
    env = collector.env
    if env.device.type != "cuda" or learner.device != env.device:
        return "CUDA graphs need the env and the learner on one CUDA device"
    if not isinstance(env, TorchVecEnv) or not env.fused:
        return f"{env.env_id} is not a native env with a fused step"
    if not hasattr(torch.cuda.CUDAGraph, "register_generator_state"):
        return f"torch {torch.__version__} cannot capture a custom generator in a CUDA graph"
    return None


class IterationGraphs:
    """One pod's rollout and update as CUDA graphs (see the module docstring).

    Parameters
    ----------
    collector, learner
        The pod's :class:`~elegantpod.pod.pod.Collector` and its learner, one with a
        static update (:data:`STATIC_UPDATE`, as PPO has).
    capture
        ``False`` runs the same static path (:meth:`PPO.update_static`, statistics on
        the device, carried tensors kept in place) eagerly and captures nothing: what a
        CPU test compares with the plain eager path, and with a captured GPU run.
    """

    def __init__(self, collector: Any, learner: Any, capture: bool = True) -> None:
        if capture:
            reason = unsupported(collector, learner)
            if reason is not None:
                raise ValueError(f"cannot capture this pod's iterations: {reason}")
        self.collector, self.learner, self.capture = collector, learner, capture
        self.sums = torch.zeros(len(learner.STAT_KEYS), device=learner.device)
        self.steps = 0
        self.graphs: tuple[Any, Any] | None = None
        self.captures = 0
        """How many times the graphs were captured (a new capture follows any change of
        the tensors or constants they hold)."""
        self.replays = 0
        """How many iterations replayed captured graphs."""
        self._fingerprint: Fingerprint | None = None
        self._static: dict[str, Tensor] = {}
        learner.use_static_update(capture)

    # -- running --------------------------------------------------------------------------
    def run(self, iterations_left: int | None = None) -> dict[str, float]:
        """One iteration (rollout and update); returns the update's statistics.

        ``iterations_left``: iterations left in the run, this one included (``None``:
        unknown). Valid graphs are replayed whatever it says; new ones are captured only
        where :func:`should_capture` says the capture pays, else the iteration runs
        eagerly. The only host synchronisation is reading the statistics at the end.
        """
        if self.capture and self.graphs is not None and self._fingerprint == self.fingerprint():
            self._sync_in()
            rollout, update = self.graphs
            rollout.replay()
            update.replay()
            self.replays += 1
        elif self.capture and should_capture(iterations_left):
            self._warm_up_and_capture()
        else:
            self._eager_iteration()
        keys = self.learner.STAT_KEYS
        return dict(zip(keys, (self.sums / max(self.steps, 1)).tolist(), strict=True))

    def _eager_iteration(self) -> None:
        self._as_inference()
        batch = self.collector.rollout()
        self.steps = self.learner.update_static(batch, self.sums)

    def invalidate(self) -> None:
        """Drop the graphs; the next :meth:`run` warms up and captures again."""
        self.graphs = None
        self._fingerprint = None

    # -- what a graph depends on -----------------------------------------------------------
    def fingerprint(self) -> Fingerprint:
        """What the graphs hold, but the carried tensors: equal fingerprints, valid graphs.

        By value: the learner's config (its floats, such as the clipping range and the
        discount, are baked into captured kernels; those the update reads from tensors,
        the learning rate, are left out) and the optimizers' per-group settings. By
        identity and address (held here, so that no new object can take a freed one's
        place): parameters, optimizer moments and step clocks, the learning-rate tensor,
        the rollout buffer, the normalizer's statistics, the episode counters and the
        random generators.
        """
        learner, collector = self.learner, self.collector
        skip = set(getattr(learner, "tensor_hparams", ()))
        config = dataclasses.asdict(learner.config)
        values: list[Any] = [sorted((k, repr(v)) for k, v in config.items() if k not in skip)]
        held: list[Any] = [collector.buffer, learner.generator, collector.env.generator]
        held += [v for v in vars(collector.buffer).values() if isinstance(v, Tensor)]
        held += list(learner.params)
        for opt in learner.optimizers.values():
            for state in opt.state.values():
                held += [v for v in state.values() if isinstance(v, Tensor)]
            for group in _group_scalars(opt):
                held += [v for v in group.values() if isinstance(v, Tensor)]
                values.append(
                    sorted((k, repr(v)) for k, v in group.items() if not isinstance(v, Tensor))
                )
        held += list(learner.obs_norm.buffers())
        held += [collector.return_sum, collector.episodes]
        return Fingerprint(values, held)

    def _carried(self) -> dict[str, Tensor]:
        """The tensors an iteration replaces and the next reads: the env's carry (see
        :class:`~elegantpod.envs.base.EnvCarry`), then the collector's observation."""
        carry = {f"env.{k}": v for k, v in self.collector.env.carry()._asdict().items()}
        carry["collector.obs"] = self.collector.obs
        return carry

    def _set_carried(self, tensors: dict[str, Tensor]) -> None:
        """Make the env and the collector go on from ``tensors`` (as :meth:`_carried`)."""
        env = self.collector.env
        fields = {k.removeprefix("env."): v for k, v in tensors.items() if k.startswith("env.")}
        env.set_carry(type(env.carry())(**fields))
        self.collector.obs = tensors["collector.obs"]

    def _as_inference(self) -> None:
        """Make the carried tensors inference tensors (a reset makes plain ones), so the
        env's compiled step meets one variant on this path, the one a rollout makes."""
        with torch.inference_mode():
            carried = self._carried()
            if not all(t.is_inference() for t in carried.values()):
                self._set_carried(
                    {k: t if t.is_inference() else t.clone() for k, t in carried.items()}
                )

    def _sync_in(self) -> None:
        """Copy tensors the pod reassigned since the last replay into the graph's own."""
        with torch.inference_mode():
            for key, current in self._carried().items():
                if current is not self._static[key]:
                    self._static[key].copy_(current)
            self._set_carried(dict(self._static))

    # -- capturing -------------------------------------------------------------------------
    def _warm_up_and_capture(self) -> None:
        self.graphs = None
        self._as_inference()
        try:
            side = _pod_streams(self.learner.device)[0]
        except Exception as exc:  # no CUDA here after all
            self._give_up(exc)
            self._eager_iteration()
            return
        current = torch.cuda.current_stream(self.learner.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            self._eager_iteration()  # a real iteration, which also warms CUDA up
        current.wait_stream(side)
        # what the warm-up allocated on the side stream and the default stream reads
        # next: the allocator must not hand it out again before that reading is done
        for tensor in self._side_allocated():
            tensor.record_stream(current)
        try:
            with _capture_lock:
                self.graphs = (self._capture_rollout(), self._capture_update())
        except Exception as exc:  # a capture that fails must not end the run
            self._give_up(exc)
            return
        self._fingerprint = self.fingerprint()
        self.captures += 1

    def _give_up(self, exc: Exception) -> None:
        cause = exc.__context__ or exc.__cause__
        after = f", after {type(cause).__name__}: {cause}" if cause is not None else ""
        warnings.warn(
            f"capturing the pod's iterations failed ({type(exc).__name__}: {exc}{after}); "
            "training on eagerly",
            RuntimeWarning,
            stacklevel=4,
        )
        self.capture = False
        self.graphs = None
        self.learner.use_static_update(False)  # an eager optimizer from now on

    def _side_allocated(self) -> list[Tensor]:
        """Tensors a warm-up may have made on its side stream: the carried ones and the
        optimizer's lazily created moments."""
        out = list(self._carried().values())
        for opt in self.learner.optimizers.values():
            for state in opt.state.values():
                out += [v for v in state.values() if isinstance(v, Tensor) and v.is_cuda]
        return [t for t in out if t.is_cuda]

    @contextlib.contextmanager
    def _graph(self, graph: Any) -> Iterator[None]:
        """Capture into ``graph`` on the pod's capture stream, and leave nothing behind
        when the capture fails.

        ``torch.cuda.graph``'s exit calls ``capture_end`` before it restores the stream,
        and ``capture_end`` raises at ``cudaStreamEndCapture`` before it ends the
        allocator's routing to the graph's pool (``torch/cuda/graphs.py``,
        ``CUDAGraph.cpp``). A failed capture then left this thread on the capture stream
        and the allocator with a capture "underway", which defers its event processing,
        while the pod trained on eagerly. Here the stream is restored and the routing
        ended. (The error a failed body raised is the ``__context__`` of the one
        ``capture_end`` raises on top of it: :meth:`_give_up` says both.)"""
        stream = _pod_streams(self.learner.device)[1]
        before = torch.cuda.current_stream(self.learner.device)
        try:
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                yield
        except Exception:
            torch.cuda.set_stream(before)
            end_routing = getattr(torch._C, "_cuda_endAllocateToPool", None)
            if end_routing is not None:
                with contextlib.suppress(Exception):  # raises when capture_end did it
                    end_routing(torch.device(self.learner.device).index or 0, graph.pool())
            raise

    def _new_graph(self) -> Any:
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(self.learner.generator)
        if self.collector.env.generator is not self.learner.generator:
            graph.register_generator_state(self.collector.env.generator)
        return graph

    def _capture_rollout(self) -> Any:
        with torch.inference_mode():
            # the graph reads these tensors where they are (CartPole's observation is a
            # view of its state: copies would split them)
            static = self._carried()
            self._static = static
            graph = self._new_graph()
            try:
                with torch.cuda.device(self.learner.device), self._graph(graph):
                    self.collector.rollout()
                    for key, current in self._carried().items():
                        static[key].copy_(current)
            finally:
                self._set_carried(dict(static))
        return graph

    def _capture_update(self) -> Any:
        graph = self._new_graph()
        batch = self.collector.buffer.batch()
        with torch.cuda.device(self.learner.device), self._graph(graph):
            self.steps = self.learner.update_static(batch, self.sums)
        return graph


class Fingerprint:
    """Values compared by equality, objects by identity and (tensors) by address.

    It holds its objects, so that none of them is freed and its ``id`` reused while the
    fingerprint lives: comparing bare ``id()``s of configs let a new config take a freed
    one's address and keep stale constants in a graph.
    """

    __slots__ = ("held", "pointers", "values")

    def __init__(self, values: list[Any], held: list[Any]) -> None:
        self.values = values
        self.held = tuple(held)
        self.pointers = tuple(x.data_ptr() if isinstance(x, Tensor) else 0 for x in held)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fingerprint):
            return NotImplemented
        return (
            self.values == other.values
            and self.pointers == other.pointers
            and len(self.held) == len(other.held)
            and all(a is b for a, b in zip(self.held, other.held, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]


def _group_scalars(opt: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """An optimizer's per-group settings, without the parameters."""
    return [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
