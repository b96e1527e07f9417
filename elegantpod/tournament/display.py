"""How a tournament shows itself: the static HTML table a notebook falls back to, and the
one-line ``repr`` a terminal prints. Both read only the tournament's public views, and
every value in the HTML is escaped (:mod:`elegantpod.widgets.html`)."""

from __future__ import annotations

from elegantpod.number_text import number


def tournament_html(t) -> str:
    """The leaderboard with its baselines, as escaped static HTML (no ipywidgets needed)."""
    from elegantpod.widgets.html import baselines_html, leaderboard_html

    s, spec = t.summary(), t.spec
    title = f"Tournament on {spec.env_id}: {s['status']}, {s['pods_total']} pods"
    board = t.leaderboard
    footer = baselines_html(
        t.baselines(),
        s["best_score"],
        spec.fitness,
        board.attrs.get("trials"),
        board.attrs.get("validation_days"),
    )
    return leaderboard_html(board, title, footer, hparams=t.leaderboard_hparams())


def tournament_text(t) -> str:
    """One line: env, algorithms, status, pods made, env steps, time, best and store."""
    s, spec = t.summary(), t.spec
    best = "no score yet"
    if s["best_pod"] is not None:
        best = f"best {spec.fitness} {number(s['best_score'])} by {s['best_pod']}"
    return (
        f"Tournament({spec.env_id}, {'+'.join(spec.algos)}, {spec.pods} pods: "
        f"{s['status']}, {s['pods_total']} made, {s['env_steps_total']:,} env steps in "
        f"{s['wall_seconds']:,.0f} s, {best}; store {s['store']!r})"
    )
