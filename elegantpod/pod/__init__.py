"""The pod: one collector, its learner(s) and an evaluator, trained as one unit.

A pod is built from a :class:`~elegantpod.config.PodSpec`, runs for a
:class:`~elegantpod.pod.budget.Budget` under :class:`~elegantpod.pod.hooks.PodHooks`, and
saves and restores itself through checkpoints. Everything here runs in the pod's own
process (a Dask worker's, or the caller's for ``train()``).

- ``pod``: :class:`~elegantpod.pod.pod.Pod`, the unit itself, with the files it writes
  as it trains (``checkpoint.pt``, ``best.pt``) and the hyperparameters it may change
  while it runs.
- ``build``: putting a pod together from its spec (envs, learners, seeds, memory check).
- ``run``: one call of ``Pod.run``: the loop of rollouts, updates and evaluations.
- ``budget``, ``hooks``: how long a pod runs, and the one way to watch and stop it.
- ``collector``, ``evaluator``: rollouts from a batched env; deterministic episodes.
- ``capture``: whole PPO iterations replayed as CUDA graphs.
- ``memory``: how much memory a pod will allocate, refused before it is built.
- ``finite``: a pod whose losses or state went NaN or infinite fails, saying whether
  its env caused it, and never saves that state.
- ``checkpoint``, ``saved``, ``restore``: checkpoint files (atomic, ``weights_only``),
  their fields parsed and checked, and a checkpoint checked against the pod loading it.
"""
