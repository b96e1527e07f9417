"""Whole PPO iterations replayed as CUDA graphs: rollout and update without Python.

Why: on a GPU an eager PPO iteration is bound by the host, not the device. At 4,096
CartPole sub-envs on an H200 one iteration launched some ten thousand small kernels from
Python and took 174 ms, while end-to-end-compiled JAX PPO did the same work in 14.5 ms
(issue 17). A CUDA graph records those launches once and replays them with one call.

:class:`IterationGraphs` captures two graphs per pod:

- **rollout**: ``horizon`` vector steps of policy forward, action sampling, the env's
  fused step (:func:`elegantpod.envs.base.whole_step`, itself one compiled kernel) and
  the buffer writes, then copies of the env's and worker's carried tensors back into
  the tensors the graph reads, so that each replay continues where the last one ended;
- **update**: GAE, every epoch's permutation and minibatch gradient steps (loss,
  backward, gradient clipping, Adam with ``capturable=True``) and the observation
  normalizer's update, summing the statistics into a device tensor that is read once
  per iteration.

Both record the very functions the eager path runs (:meth:`Worker.rollout
<elegantpod.pod.Worker.rollout>`, :meth:`PPO.update_static
<elegantpod.agents.ppo.PPO.update_static>`), so a replay computes what an eager
iteration computes from the same state, including the random draws: the learner's and
the env's generators are registered with each graph and advance as they would eagerly.

A graph holds the addresses of every tensor it touches. Anything that replaces one of
them (a checkpoint load, a hyperparameter change baked into the kernels such as a new
learning rate, a rebuilt optimizer) is noticed through :meth:`IterationGraphs.fingerprint`
before the next replay and the graphs are captured again. Tensors the pod reassigns as
it runs (the env's state after a reset, the worker's observation) are copied into the
graph's own before a replay instead.

The first iteration after a (re)capture runs eagerly on a side stream: it warms up
lazily initialised CUDA state (cuBLAS handles, compiled kernels) as CUDA graphs
require, and trains like any other iteration. If capturing fails, the pod warns once
and stays eager.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import torch

from elegantpod.agents.ppo import PPO

Tensor = torch.Tensor

ENV_CARRY = ("state", "elapsed", "episode_return", "_draws", "_reset_key")
"""A native env's tensors that one step replaces and the next step reads."""

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


def unsupported(worker: Any, learner: Any) -> str | None:
    """Why this pod's iterations cannot be captured, or ``None`` when they can."""
    from elegantpod.envs.base import TorchVecEnv

    if not isinstance(learner, PPO):
        return f"whole-iteration capture covers PPO, not {type(learner).__name__}"
    env = worker.env
    if env.device.type != "cuda" or learner.device != env.device:
        return "CUDA graphs need the env and the learner on one CUDA device"
    if not isinstance(env, TorchVecEnv) or not env._fused:
        return f"{env.env_id} is not a native env with a fused step"
    if not hasattr(torch.cuda.CUDAGraph, "register_generator_state"):
        return f"torch {torch.__version__} cannot capture a custom generator in a CUDA graph"
    return None


class IterationGraphs:
    """One pod's rollout and update as CUDA graphs (see the module docstring).

    Parameters
    ----------
    worker, learner
        The pod's :class:`~elegantpod.pod.Worker` and its PPO learner.
    capture
        ``False`` runs the same static path (:meth:`PPO.update_static`, statistics on
        the device, carried tensors kept in place) eagerly and captures nothing: what a
        CPU test compares with the plain eager path, and with a captured GPU run.
    """

    def __init__(self, worker: Any, learner: PPO, capture: bool = True) -> None:
        if capture:
            reason = unsupported(worker, learner)
            if reason is not None:
                raise ValueError(f"cannot capture this pod's iterations: {reason}")
        self.worker, self.learner, self.capture = worker, learner, capture
        self.sums = torch.zeros(len(PPO.STAT_KEYS), device=learner.device)
        self.steps = 0
        self.graphs: tuple[Any, Any] | None = None
        self.captures = 0
        """How many times the graphs were captured (a new capture follows any change of
        the tensors or constants they hold)."""
        self._fingerprint: tuple | None = None
        self._static: dict[tuple[str, str], Tensor] = {}

    # -- running --------------------------------------------------------------------------
    def run(self) -> dict[str, float]:
        """One iteration (rollout and update); returns the update's statistics.

        The only host synchronisation is reading those statistics at the end.
        """
        if not self.capture:
            self._eager_iteration()
        elif self.graphs is None or self._fingerprint != self.fingerprint():
            self._warm_up_and_capture()
        else:
            self._sync_in()
            rollout, update = self.graphs
            rollout.replay()
            update.replay()
        return dict(zip(PPO.STAT_KEYS, (self.sums / max(self.steps, 1)).tolist(), strict=True))

    def _eager_iteration(self) -> None:
        batch = self.worker.rollout()
        self.steps = self.learner.update_static(batch, self.sums)

    def invalidate(self) -> None:
        """Drop the graphs; the next :meth:`run` warms up and captures again."""
        self.graphs = None
        self._fingerprint = None

    # -- what a graph depends on -----------------------------------------------------------
    def fingerprint(self) -> tuple:
        """Identities of every tensor and constant the graphs hold, but the carried ones.

        Parameters, gradients' owners, optimizer moments, the rollout buffer, the
        normalizer's statistics and the config object (whose floats, such as the
        learning rate and clipping range, are baked into captured kernels).
        """
        learner, worker = self.learner, self.worker
        ids: list[int] = [id(learner.config), id(worker.buffer), id(learner.generator)]
        ids += [id(p) for p in learner.params]
        for opt in learner.optimizers.values():
            for state in opt.state.values():
                ids += [id(v) for v in state.values() if isinstance(v, Tensor)]
            ids += [hash(repr(sorted(g.items(), key=str))) for g in _group_scalars(opt)]
        ids += [id(b) for b in learner.obs_norm.buffers()]
        ids += [id(worker.return_sum), id(worker.episodes), id(worker.env.generator)]
        return tuple(ids)

    def _carried(self) -> list[tuple[Any, str]]:
        return [(self.worker.env, name) for name in ENV_CARRY] + [(self.worker, "obs")]

    def _sync_in(self) -> None:
        """Copy tensors the pod reassigned since the last replay into the graph's own."""
        with torch.inference_mode():
            for owner, name in self._carried():
                static = self._static[(type(owner).__name__, name)]
                current = getattr(owner, name)
                if current is not static:
                    static.copy_(current)
                    setattr(owner, name, static)

    # -- capturing -------------------------------------------------------------------------
    def _warm_up_and_capture(self) -> None:
        self.graphs = None
        side = _pod_streams(self.learner.device)[0]
        side.wait_stream(torch.cuda.current_stream(self.learner.device))
        with torch.cuda.stream(side):
            self._eager_iteration()  # a real iteration, which also warms CUDA up
        torch.cuda.current_stream(self.learner.device).wait_stream(side)
        try:
            with _capture_lock:
                self.graphs = (self._capture_rollout(), self._capture_update())
        except Exception as exc:  # a capture that fails must not end the run
            warnings.warn(
                f"capturing the pod's iterations failed ({type(exc).__name__}: {exc}); "
                "training on eagerly",
                RuntimeWarning,
                stacklevel=3,
            )
            self.capture = False
            self.graphs = None
            return
        self._fingerprint = self.fingerprint()
        self.captures += 1

    def _graph(self, graph: Any) -> Any:
        stream = _pod_streams(self.learner.device)[1]
        return torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local")

    def _new_graph(self) -> Any:
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(self.learner.generator)
        if self.worker.env.generator is not self.learner.generator:
            graph.register_generator_state(self.worker.env.generator)
        return graph

    def _capture_rollout(self) -> Any:
        carried = self._carried()
        with torch.inference_mode():
            static = {}
            for owner, name in carried:
                # a private copy the graph reads, unless another carried tensor owns
                # this memory (CartPole's observation is a view of its state)
                static[(type(owner).__name__, name)] = getattr(owner, name)
            self._static = static
            graph = self._new_graph()
            try:
                with torch.cuda.device(self.learner.device), self._graph(graph):
                    self.worker.rollout()
                    for owner, name in carried:
                        static[(type(owner).__name__, name)].copy_(getattr(owner, name))
            finally:
                for owner, name in carried:
                    setattr(owner, name, static[(type(owner).__name__, name)])
        return graph

    def _capture_update(self) -> Any:
        graph = self._new_graph()
        batch = self.worker.buffer.batch()
        with torch.cuda.device(self.learner.device), self._graph(graph):
            self.steps = self.learner.update_static(batch, self.sums)
        return graph


def _group_scalars(opt: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """An optimizer's per-group settings, without the parameters."""
    return [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
