"""Learners, one algorithm per module, all on the ``Learner`` protocol.

- ``base``: the ``Learner`` protocol every algorithm follows; ``contract``: what
  ``register_algo`` checks a learner of your own declares.
- ``hparams``: a hyperparameter declared once in its config field: default, hard
  limit, search domain, key column, structural or not.
- ``ppo``, ``sac``, ``td3``, ``ddpg``, ``dqn``: one file per algorithm, its config, its
  losses in the paper's notation, its networks.
- ``offpolicy``: what replay-based learners share (the replay ring, warm-up, ratio).
- ``nets``: network blocks: perceptrons, the image encoder, running normalisation.
- ``noise``: exploration noise correlated in time (Ornstein-Uhlenbeck, pink).
- ``fusion``: several learners of one pod, their parameters fused.

The names below are the part's public face, and ``register_algo`` the registry users
add their own learner to.
"""

import re

from elegantpod.agents.base import REGISTRY, Learner
from elegantpod.agents.contract import check_learner
from elegantpod.agents.ddpg import DDPG, DDPGConfig
from elegantpod.agents.dqn import DQN, DQNConfig
from elegantpod.agents.ppo import PPO, PPOConfig
from elegantpod.agents.sac import SAC, SACConfig
from elegantpod.agents.td3 import TD3, TD3Config
from elegantpod.search.space import Bound, Choice, check_search_space

ALGOS: dict[str, type[Learner]] = REGISTRY  # one dict: the learners read it too
ALGOS.update({"ppo": PPO, "sac": SAC, "td3": TD3, "ddpg": DDPG, "dqn": DQN})
BUILTIN = frozenset(ALGOS)
"""The algorithms that ship with elegantpod (every worker knows them)."""
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""What an algorithm's name may be (after lower-casing ASCII letters): ASCII letters,
digits and underscores, a letter first, at most 32 characters. Why: the name is a key of
stores and checkpoints, a column and a label of HTML views, part of ``--set
algo.key=value`` and ``--algos a,b`` options and of file names, so a look-alike
(``'ppo '``, a zero-width space, a Cyrillic ``р``) or a separator (``,``, ``.``, a line
break) would be another algorithm that prints like a known one, or split where it is
read."""


def register_algo(
    cls: type[Learner] | None = None,
    name: str | None = None,
    *,
    search_space: dict[str, Bound] | None = None,
):
    """Make a :class:`Learner` subclass usable by name in pods, tournaments and the CLI.

    Why a registry: specs and checkpoints name their algorithm (``PodSpec.algo``), so a
    custom learner must be findable by that name wherever a pod is rebuilt. A
    :class:`~elegantpod.tournament.Tournament` ships the registration of every
    non-built-in algorithm it uses to its Dask workers (as a worker plugin, so workers
    that join later get it too). Usable as a class decorator, bare or with arguments
    (``@register_algo(search_space={...})``). Returns ``cls``.

    Parameters
    ----------
    cls
        The learner class.
    name
        Registry name; default: ``cls.name``.
    search_space
        ``{hyperparameter: Bound}``: where a tournament's generator may move each one.
        It becomes the class attribute ``cls.search_space`` (what the tournament reads).
        Without one, the class keeps the space it has: its own, or else the one it
        inherits (a PPO subclass: PPO's); a learner with an empty space keeps its
        hyperparameters under the default mutation policy.

    Raises
    ------
    ValueError
        If ``cls`` is not a ``Learner`` with ``name`` and ``config_cls``, the name is not
        of the form :data:`NAME` says (it is shown escaped, so that an invisible or
        look-alike character shows), or it belongs to a built-in algorithm.
    """
    if cls is None:  # @register_algo(...) with arguments
        return lambda c: register_algo(c, name, search_space=search_space)
    if not (isinstance(cls, type) and issubclass(cls, Learner)):
        raise ValueError(f"register_algo needs a Learner subclass, got {cls!r}")
    given = name or getattr(cls, "name", "")
    if not given:
        raise ValueError(f"{cls.__name__} has no name: set the class attribute `name`")
    name = check_name(given)
    if name in BUILTIN and ALGOS[name] is not cls:
        raise ValueError(f"{name!r} is a built-in algorithm; choose another name")
    if not isinstance(getattr(cls, "config_cls", None), type):
        raise ValueError(f"{cls.__name__} needs a `config_cls` (a frozen dataclass)")
    check_learner(cls)
    if search_space is not None:
        # a fresh dict on this class: a parent's space (PPO's, say) is never changed
        cls.search_space = check_search_space(search_space, cls.config_cls, cls.__name__)
    cls.name = name
    ALGOS[name] = cls
    return cls


def check_name(name: object) -> str:
    """``name`` in lower case, or ``ValueError`` naming it (escaped to ASCII) unless it is
    ASCII letters, digits and underscores, a letter first, at most 32 characters
    (:data:`NAME`)."""
    # ASCII letters only are lowered: str.lower() would turn the Kelvin sign into a "k"
    text = name.translate(_ASCII_LOWER) if isinstance(name, str) else None
    if text is None or not NAME.fullmatch(text):
        shown = ascii(name) if not isinstance(name, str) else ascii(name[:100])
        shown += "..." if isinstance(name, str) and len(name) > 100 else ""
        raise ValueError(
            f"algorithm name {shown} must match [a-z][a-z0-9_]* (ASCII letters, digits "
            "and underscores, a letter first, at most 32 characters): it names store "
            "entries, files and --set algo.key=value options"
        )
    return text


UNREGISTERED_HINT = (
    " (a learner of your own is known only once the module calling register_algo is "
    "imported: import it first, or pass --import MODULE on the command line)"
)
"""Said after every unknown-algorithm error: a run, store or checkpoint made with a
registered learner names it, and reading it in a process that has not imported that
learner's module is the usual cause."""

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def get_algo(name: str) -> type[Learner]:
    """The learner class for ``name``; raises ``ValueError`` naming an unknown one."""
    try:
        return ALGOS[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {name!r}; choose one of {', '.join(sorted(ALGOS))}"
            f"{UNREGISTERED_HINT}"
        ) from None


__all__ = [
    "ALGOS",
    "DDPG",
    "Bound",
    "Choice",
    "DQN",
    "PPO",
    "SAC",
    "TD3",
    "DDPGConfig",
    "DQNConfig",
    "Learner",
    "PPOConfig",
    "SACConfig",
    "TD3Config",
    "get_algo",
    "register_algo",
]
