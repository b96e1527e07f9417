"""What an env class may add to the generic layers: baselines, leaderboard columns, the
values of its file keywords that name no file, and the layout of its inputs and outputs.

Why: the tournament, the command line and the env registry serve every env, so they
import no domain package (such as :mod:`elegantpod.finance`); an env that has more to
show (a trading env's buy-and-hold baselines, the deflated Sharpe ratio of its
leaderboard) says so through these classmethods. Generic code finds the class by env id
(:func:`~elegantpod.envs.registry.env_hooks`) and calls them; the defaults here add
nothing, so an env that overrides none behaves as if the hooks did not exist.
:class:`~elegantpod.envs.base.TorchVecEnv` and
:class:`~elegantpod.finance.trading.env.StockTradingEnv` inherit them; a gymnasium,
MJX or Isaac env id gets the defaults.
"""

from __future__ import annotations

from typing import Any, ClassVar


class EnvHooks:
    """The classmethods generic code asks an env class; subclasses override what they add.

    ``fitnesses``
        What a leaderboard may rank this env's pods by: ``"return"`` (the mean
        evaluation return) and the names of the metrics its evaluations report (higher is
        better for each). Checked before any work (:func:`~elegantpod.envs.registry.
        check_fitness`), so a typo fails naming the choices.
    ``fitness_advice``
        How to evaluate the env so that its evaluations report those metrics, for the
        error a tournament raises when its evaluation settings record none.
    ``shipped_values``
        Values of a file keyword (``path_kwargs``) that name data the package ships, so
        that a spec naming them is not treated as pointing at a file or URL.
    ``baselines``
        What doing nothing scores on a tournament's evaluation range, by name: shown
        under its leaderboard (widget, ``_repr_html_``, the CLI). May read data: a
        tournament asks once and keeps the answer.
    ``leaderboard_columns``
        Extra columns of a tournament's leaderboard. Called on every read of it (a
        dashboard reads it every second): keep it cheap, reading files at most once per
        spec.
    ``leaderboard_notes``
        Lines that explain those columns, printed under the leaderboard by the CLI.
    ``layout`` and ``fit_layout``
        What each of the policy's per-item inputs and outputs stands for (a trading env's
        tickers, in order, and its features), saved in every checkpoint, and how to build
        the env so that new data meets an agent in that layout (or why it cannot).
        Why: a policy's inputs and outputs are matched by position, so an agent loaded
        beside data in another column order would trade one stock by another's slot,
        with no error anywhere (:mod:`elegantpod.pod.restore` applies both).
    """

    fitnesses: ClassVar[tuple[str, ...]] = ("return",)
    """What a leaderboard may rank by: the return, and the metrics evaluations report."""

    @classmethod
    def fitness_advice(cls) -> str | None:
        """How to evaluate this env so that it reports its metrics (``None``: nothing
        to say, the default)."""
        return None

    def layout(self) -> dict[str, list[str]] | None:
        """``{name: labels}``: what the policy's inputs and outputs stand for, in order
        (e.g. ``{"tickers": [...], "features": [...]}``); ``None`` (the default): their
        order is fixed by the env id alone."""
        return None

    @classmethod
    def fit_layout(cls, env_kwargs: dict[str, Any], layout: dict[str, list[str]]) -> dict[str, Any]:
        """``env_kwargs`` changed so that the env they build has ``layout`` (a trading
        env's data put in the agent's ticker order), or a ``ValueError`` that names what
        the data lacks. Called only where :meth:`layout` returned one. Default: as given."""
        return dict(env_kwargs)

    @classmethod
    def shipped_values(cls, key: str) -> frozenset[str]:
        """Values of the file keyword ``key`` that name what the package ships (a sample
        such as ``"sp500"``), not a file or URL: a checkpoint or store may name them
        freely (see :func:`~elegantpod.envs.registry.external_sources`). Default: none."""
        return frozenset()

    @classmethod
    def baselines(
        cls, env_kwargs: dict[str, Any], eval_env_kwargs: dict[str, Any], fitness: str
    ) -> dict[str, float]:
        """Scores of strategies that need no agent on the evaluation range these keywords
        describe (the evaluation env's are ``{**env_kwargs, **eval_env_kwargs}``),
        measured with the leaderboard's ``fitness``: ``{name: score}``. Default: none."""
        return {}

    @classmethod
    def leaderboard_columns(cls, board, trials: int, spec) -> dict[str, list]:
        """Columns to add to a tournament's leaderboard ``board`` (a DataFrame, best
        first): ``{name: values}``, one value per row. ``trials`` counts the pods scored
        so far; ``spec`` is the tournament's spec. It may record in ``board.attrs`` what
        a reader needs to interpret them. Default: none."""
        return {}

    @classmethod
    def leaderboard_notes(cls, board) -> list[str]:
        """One line per extra column of ``board`` that needs explaining (read from its
        values and ``attrs``), for the command line to print under it. Default: none."""
        return []
