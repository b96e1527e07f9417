"""elegantpod: Jupyter-first, cloud-native deep reinforcement learning.

Batched torch environments, PPO, SAC, TD3, DDPG and DQN learners, and pods (worker + learner +
evaluator) that train, evaluate and checkpoint themselves.

>>> import elegantpod
>>> result = elegantpod.train("CartPole-v1", "ppo", target_reward=475)  # doctest: +SKIP
"""

import importlib as _importlib

# Lazy: ``import elegantpod`` (and ``python -m elegantpod.cli``) imports no torch, pandas
# or Dask until a name is used. That keeps the CLI's --help instant, and lets the CLI take
# the working folder off sys.path before any third-party import could be shadowed there.
_WHERE = {
    "finance": "elegantpod.finance",
    **dict.fromkeys(
        ["ALGOS", "DDPG", "DQN", "PPO", "SAC", "TD3", "DDPGConfig", "DQNConfig"]
        + ["PPOConfig", "SACConfig", "TD3Config", "get_algo"],
        "elegantpod.agents",
    ),
    **dict.fromkeys(
        ["CheckpointError", "load_checkpoint", "save_checkpoint"], "elegantpod.checkpoint"
    ),
    **dict.fromkeys(["cluster", "shutdown"], "elegantpod.dask_cluster"),
    "gateway_cluster": "elegantpod.gateway",
    "PodSpec": "elegantpod.config",
    **dict.fromkeys(
        ["choice", "from_tune", "lograndint", "loguniform", "qlograndint", "qloguniform"]
        + ["qrandint", "quniform", "randint", "uniform"],
        "elegantpod.search",
    ),
    **dict.fromkeys(["available_envs", "make_env", "register_env"], "elegantpod.envs"),
    "Budget": "elegantpod.budget",
    "Collector": "elegantpod.collector",
    "Evaluator": "elegantpod.evaluator",
    "PodHooks": "elegantpod.hooks",
    "Pod": "elegantpod.pod",
    "Policy": "elegantpod.policy",
    "record": "elegantpod.recording",
    **dict.fromkeys(["Tournament", "TournamentFailed", "TournamentSpec"], "elegantpod.tournament"),
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
