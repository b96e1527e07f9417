"""elegantpod: Jupyter-first, cloud-native deep reinforcement learning.

Batched torch environments, PPO, SAC, TD3, DDPG and DQN learners, and pods (worker + learner +
evaluator) that train, evaluate and checkpoint themselves.

>>> import elegantpod
>>> result = elegantpod.train("CartPole-v1", "ppo", target_reward=475)  # doctest: +SKIP

The map. Each folder is one part, its ``__init__`` docstring the part's own map; arrows
point down this list, and finance is a client of the rest:

- ``checks/``: checks of values from users and files (overrides, limits, text, JSON).
- ``envs/``: batched torch envs (same-step auto-reset), gymnasium, MJX, Isaac Gym.
- ``agents/``: one file per algorithm, the learner protocol, networks, fusion, noise.
- ``search/``: search spaces (Tune's names), their plain-JSON form.
- ``pod/``: the pod (collector, learner(s), evaluator), its checkpoints and memory.
- ``policy/``: a trained actor to deploy: ``Policy``, export, videos.
- ``clusters/``: where pods run: ``cluster()`` on a LocalCluster, GPUs, a gateway.
- ``tournament/``: the asynchronous population of pods on Dask (core, store, worker,
  client, the ``Tournament`` facade).
- ``tracking/``, ``widgets/``: experiment tracking; the live dashboard.
- ``comparison/``: methods compared over seeds (``compare()``): Kaplan-Meier and RMST
  of censored times, IQMs, bootstrap and Wilson intervals, probability of improvement,
  paired permutation and log-rank tests Holm-adjusted over a family, the HTML report.
- ``finance/``: market data, the trading env, statistics, backtests, reports.
- ``cli/``: the ``elegantpod`` command.

The shared modules at the root belong to no one part: ``types`` (``Batch``, the one data
contract, and the results), ``config`` (``PodSpec``), ``devices`` and ``threads`` (where
and on how many threads torch runs), ``buffers`` (rollout and replay storage),
``training`` (``train()``, one pod start to finish, its progress bar and callback),
``safe_files`` and ``provenance`` (local files read safely, and whose they are),
``workspace`` (``workdir()``), ``figures`` (charts with plain text, as PNGs inside a page),
``number_text`` and ``html_table`` (how every view writes numbers and
tables).
"""

import importlib as _importlib

# Lazy: ``import elegantpod`` (and ``python -m elegantpod.cli``) imports no torch, pandas
# or Dask until a name is used. That keeps the CLI's --help instant, and lets the CLI take
# the working folder off sys.path before any third-party import could be shadowed there.
_WHERE = {
    "finance": "elegantpod.finance",
    **dict.fromkeys(["compare", "Comparison"], "elegantpod.comparison"),
    **dict.fromkeys(
        ["ALGOS", "DDPG", "DQN", "PPO", "SAC", "TD3", "DDPGConfig", "DQNConfig"]
        + ["PPOConfig", "SACConfig", "TD3Config", "get_algo"],
        "elegantpod.agents",
    ),
    **dict.fromkeys(
        ["CheckpointError", "load_checkpoint", "save_checkpoint"], "elegantpod.pod.checkpoint"
    ),
    "cluster": "elegantpod.clusters.cluster",
    "shutdown": "elegantpod.clusters.shutdown",
    "gateway_cluster": "elegantpod.clusters.gateway",
    "PodSpec": "elegantpod.config",
    **dict.fromkeys(
        ["choice", "from_tune", "lograndint", "loguniform", "qlograndint", "qloguniform"]
        + ["qrandint", "quniform", "randint", "uniform"],
        "elegantpod.search",
    ),
    **dict.fromkeys(["available_envs", "make_env", "register_env"], "elegantpod.envs"),
    "Budget": "elegantpod.pod.budget",
    "Collector": "elegantpod.pod.collector",
    "Evaluator": "elegantpod.pod.evaluator",
    "PodHooks": "elegantpod.pod.hooks",
    "Pod": "elegantpod.pod.pod",
    "Policy": "elegantpod.policy.policy",
    "record": "elegantpod.policy.recording",
    **dict.fromkeys(["Tournament", "TournamentFailed", "TournamentSpec"], "elegantpod.tournament"),
    "Deployment": "elegantpod.tournament.deployment",
    "train": "elegantpod.training",
    **dict.fromkeys(["Batch", "EvalResult", "Progress", "TrainResult"], "elegantpod.types"),
    **dict.fromkeys(["workdir", "clear_workdir"], "elegantpod.workspace"),
}


def __getattr__(name: str):
    """Import the module that holds ``name`` on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'elegantpod' has no attribute {name!r}")
    value = _importlib.import_module(module)
    if name != "finance":
        value = getattr(value, name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    """The public names, each once (a loaded one is in ``globals()`` and ``_WHERE``),
    the submodules loaded so far and the module's dunders; no private helpers."""
    here = {n for n in globals() if not n.startswith("_") or n.startswith("__")}
    return sorted(here | set(_WHERE))


__version__ = "0.1.0"

__all__ = [
    "ALGOS",
    "DDPG",
    "DQN",
    "PPO",
    "SAC",
    "TD3",
    "DDPGConfig",
    "DQNConfig",
    "TD3Config",
    "Batch",
    "Budget",
    "CheckpointError",
    "Collector",
    "EvalResult",
    "Evaluator",
    "Pod",
    "PodHooks",
    "Policy",
    "PPOConfig",
    "PodSpec",
    "Progress",
    "SACConfig",
    "TrainResult",
    "Tournament",
    "TournamentFailed",
    "TournamentSpec",
    "available_envs",
    "cluster",
    "compare",
    "Comparison",
    "Deployment",
    "gateway_cluster",
    "shutdown",
    "finance",
    "get_algo",
    "load_checkpoint",
    "make_env",
    "record",
    "register_env",
    "save_checkpoint",
    "train",
    "workdir",
    "clear_workdir",
    "choice",
    "from_tune",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "quniform",
    "randint",
    "uniform",
]
