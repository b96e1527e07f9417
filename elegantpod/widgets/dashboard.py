"""The live dashboard: watch and steer a running tournament from Jupyter.

A thin view: every button calls a public :class:`~elegantpod.tournament.Tournament`
method (``pause``, ``unpause``, ``stop``, ``mutate``, ``add_pod``, ``scale``; "Watch best"
records ``Policy.from_pod(best()).record(...)``) and every
panel reads public views (``leaderboard``, ``pods``, ``curves``, ``lineage``,
``cluster_info``, ``summary``). A daemon thread refreshes it about once a second without
blocking the kernel; table cells are diffed, so only changed cells send messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from typing import Any

import ipywidgets as W

from elegantpod.agents import get_algo
from elegantpod.policy.policy import Policy
from elegantpod.widgets.html import (
    COLUMNS,
    baselines_html,
    fmt,
    leaderboard_rows,
    lineage_html,
    schedule_html,
)


def parse_hparams(text: str) -> dict[str, str]:
    """``"lr=1e-3, gamma=0.98"`` -> ``{"lr": "1e-3", "gamma": "0.98"}`` (values checked later)."""
    out = {}
    for part in (p.strip() for p in text.replace(";", ",").split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected name=value, got {part!r}")
        out[key.strip()] = value.strip()
    return out


class Dashboard:
    """ipywidgets dashboard bound to a tournament; display ``dashboard.widget``.

    Parameters
    ----------
    tournament
        The tournament to watch and steer.
    refresh_seconds
        Interval of the background refresh (at least 0.2 s); ``0`` disables it (call
        :meth:`refresh` yourself).
    """

    def __init__(self, tournament, refresh_seconds: float = 1.0):
        self.t = tournament
        self.refresh_seconds = refresh_seconds
        self._cells: list[list[W.HTML]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._curve_drawn_at = 0.0
        self._curve_count = -1

        self.header = W.HTML()
        header_cells = [W.HTML(f"<b>{c}</b>") for c in COLUMNS]
        self.table = W.GridBox(
            header_cells,
            layout=W.Layout(
                grid_template_columns=f"repeat({len(COLUMNS)}, auto)", grid_gap="2px 12px"
            ),
        )
        self.baselines = W.HTML()
        """Buy-and-hold on the leaderboard's range, for trading tournaments."""
        self.message = W.HTML()

        self.pod_select = W.Dropdown(description="pod", options=[])
        self.pause_button = W.Button(description="Pause", icon="pause")
        self.resume_button = W.Button(description="Resume", icon="play")
        self.stop_button = W.Button(description="Stop", icon="stop", button_style="danger")
        self.hparam_select = W.Dropdown(description="hparam", options=[])
        self.hparam_value = W.Text(description="value", placeholder="e.g. 3e-4")
        self.mutate_button = W.Button(description="Mutate", icon="random")
        self.pause_button.on_click(lambda _: self._act("pause", self.t.pause))
        self.resume_button.on_click(lambda _: self._act("resume", self.t.unpause))
        self.stop_button.on_click(lambda _: self._act("stop", self.t.stop))
        self.mutate_button.on_click(lambda _: self._mutate())
        self.pod_select.observe(lambda _: self._fill_hparams(), names="value")

        self.algo_select = W.Dropdown(description="algo", options=list(self.t.spec.algos))
        self.parent_select = W.Dropdown(description="parent", options=[("none", "")], value="")
        self.new_hparams = W.Text(description="hparams", placeholder="lr=1e-3, gamma=0.98")
        self.add_button = W.Button(description="Add pod", icon="plus", button_style="success")
        self.add_button.on_click(lambda _: self._add())

        # An Image, not an Output: the refresh thread only sets a value (a trait synced to
        # the front end); `with output:` from a thread would capture whatever cell runs.
        self.curves = W.Image(format="png", layout=W.Layout(width="100%", max_width="1000px"))
        self.cluster = W.HTML()
        self.scale_up = W.Button(description="+1 worker", icon="plus")
        self.scale_down = W.Button(description="-1 worker", icon="minus")
        self.scale_up.on_click(lambda _: self._scale(+1))
        self.scale_down.on_click(lambda _: self._scale(-1))
        self.lineage = W.HTML()
        self.watch_button = W.Button(description="Watch best", icon="film")
        self.watch_steps = W.BoundedIntText(value=500, min=1, max=100_000, description="steps")
        self.watch_button.on_click(lambda _: self._watch())
        self.video = W.Output()
        """The best agent's video, set by a "Watch best" click (in the kernel's thread)."""

        controls = W.VBox(
            [
                W.HBox([self.pod_select, self.pause_button, self.resume_button, self.stop_button]),
                W.HBox([self.hparam_select, self.hparam_value, self.mutate_button]),
                W.HBox([self.algo_select, self.parent_select, self.new_hparams, self.add_button]),
                W.HBox([self.watch_button, self.watch_steps]),
                self.message,
                self.video,
            ]
        )
        cluster_box = W.VBox([self.cluster, W.HBox([self.scale_up, self.scale_down])])
        tabs = W.Tab(
            children=[W.VBox([self.table, self.baselines]), self.curves, cluster_box, self.lineage],
            titles=("Leaderboard", "Curves", "Cluster", "Lineage"),
            selected_index=0,
        )
        self.tabs = tabs
        self.widget = W.VBox([self.header, tabs, controls])
        self.refresh()
        self._thread = None
        self.set_refresh(refresh_seconds)

    def _repr_mimebundle_(self, **kwargs):
        """A dashboard as a cell's last value shows its widget."""
        return self.widget._repr_mimebundle_(**kwargs)

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called (the widget no longer shows anything)."""
        return self._stop.is_set()

    def set_refresh(self, seconds: float) -> None:
        """Refresh every ``seconds`` (at least 0.2) in the background; ``0``: stop."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError(f"refresh_seconds must be a number >= 0, got {seconds!r}")
        self.refresh_seconds = seconds
        is_live = self.t.status not in ("finished", "stopped", "failed") and not self.is_closed
        is_running = self._thread is not None and self._thread.is_alive()
        if seconds and is_live and not is_running:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name="elegantpod-dashboard"
            )
            self._thread.start()

    # -- actions: each is one public Tournament call -----------------------------------
    def _say(self, text: str, error: bool = False) -> None:
        color = "#b71c1c" if error else "#1b5e20"
        self.message.value = f'<span style="color:{color}">{fmt(text)}</span>'

    def _act(self, label: str, method) -> None:
        pod = self.pod_select.value
        if pod is None:
            self._say("choose a pod first", error=True)
            return
        try:
            method(pod)
        except ValueError as exc:
            self._say(str(exc), error=True)
        else:
            self._say(f"{label} {pod}: done")
            self.refresh()

    def _mutate(self) -> None:
        pod, name, value = self.pod_select.value, self.hparam_select.value, self.hparam_value.value
        if pod is None or name is None:
            self._say("choose a pod and a hyperparameter", error=True)
            return
        try:
            self.t.mutate(pod, **{name: value})
        except ValueError as exc:
            self._say(str(exc), error=True)
        else:
            self._say(f"{pod}: {name} = {value}")
            self.refresh()

    def _add(self) -> None:
        try:
            pod = self.t.add_pod(
                algo=self.algo_select.value,
                parent=self.parent_select.value or None,
                **parse_hparams(self.new_hparams.value),
            )
        except ValueError as exc:
            self._say(str(exc), error=True)
        else:
            self._say(f"added {pod}")
            self.refresh()

    def _watch(self) -> None:
        """One deterministic episode of the best agent:
        ``Policy.from_pod(t.best()).record(...)``."""
        self._say("recording the best agent...")
        try:
            pod = self.t.best(device="cpu")
            try:
                video = Policy.from_pod(pod).record(episodes=1, max_steps=self.watch_steps.value)
            finally:
                pod.close()  # its envs and buffers: a click must not leak them
        except ValueError as exc:
            self._say(str(exc), error=True)
            return
        # outputs set directly, not `with self.video:` (that captures only in a kernel)
        data = {"text/html": video._repr_html_(), "text/plain": repr(video)}
        self.video.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)
        self._say(f"best agent: {video.steps[0]} steps, return {video.returns[0]:.4g}")

    def _scale(self, delta: int) -> None:
        try:
            n = max(0, self.t.cluster_info()["workers"] + delta)
            self.t.scale(n)
        except ValueError as exc:
            self._say(str(exc), error=True)
        else:
            self._say(f"scaling to {n} workers")

    # -- refresh ---------------------------------------------------------------------
    def _run(self) -> None:
        first = True
        while not self._stop.wait(max(0.2, self.refresh_seconds)) and self.refresh_seconds:
            if first:
                # JupyterLab opens a Tab on the last child it rendered, whatever the model
                # says; re-sending the selection once the view exists shows the leaderboard.
                first = False
                self.tabs.selected_index = 1
                self.tabs.selected_index = 0
            with contextlib.suppress(Exception):  # a refresh must never kill the thread
                self.refresh()
            if self.t.status in ("finished", "stopped", "failed"):
                with contextlib.suppress(Exception):
                    self.refresh()
                break

    def close(self) -> None:
        """Stop refreshing and close the widgets."""
        self._stop.set()
        self.widget.close()

    def refresh(self) -> None:
        """Pull the tournament's state into the widgets (diffed: unchanged cells stay)."""
        with self._lock:
            s = self.t.summary()
            best = "-" if s["best_score"] is None else f"{fmt(s['best_score'])} ({s['best_pod']})"
            self._set(
                self.header,
                (
                    f"<b>{fmt(self.t.spec.env_id)}</b> tournament: {fmt(s['status'])} · best "
                    f"{best} · {fmt(s['wall_seconds'])} s · "
                    f"{fmt(s['env_steps_total'])} env steps · "
                    f"{s['pods_total']} pods, {s['pods_failed']} failed"
                    + (
                        f' · <span style="color:#b71c1c">{fmt(s["warning"])}</span>'
                        if s.get("warning")
                        else ""
                    )
                ),
            )
            board = self.t.leaderboard
            self._update_table(leaderboard_rows(board, self.t.leaderboard_hparams()))
            fitness = self.t.spec.fitness
            notes = self.t.leaderboard_notes(board)
            footer = baselines_html(self.t.baselines(), s["best_score"], fitness, notes)
            self._set(self.baselines, footer)
            records = self.t.pods
            pods = sorted(records["pod_id"]) if len(records) else []
            if list(self.pod_select.options) != pods:
                keep = self.pod_select.value
                self.pod_select.options = pods
                self.pod_select.value = keep if keep in pods else (pods[0] if pods else None)
            parents = [("none", "")] + [(p, p) for p in board["pod"]]
            if list(self.parent_select.options) != parents:
                keep = self.parent_select.value
                self.parent_select.options = parents
                self.parent_select.value = keep if keep in [v for _, v in parents] else ""
            if not self.hparam_select.options:
                self._fill_hparams()
            self._refresh_cluster()
            self._refresh_lineage()
            self._refresh_curves()

    @staticmethod
    def _set(widget, value) -> None:
        if widget.value != value:
            widget.value = value

    def _update_table(self, rows: list[list[str]]) -> None:
        while len(self._cells) < len(rows):
            cells = [W.HTML() for _ in COLUMNS]
            self._cells.append(cells)
            self.table.children = (*self.table.children, *cells)
        for i, cells in enumerate(self._cells):
            values = rows[i] if i < len(rows) else [""] * len(COLUMNS)
            for cell, value in zip(cells, values, strict=True):
                text = f"<b>{value}</b>" if i == 0 and value else value
                self._set(cell, text)

    def _fill_hparams(self) -> None:
        pod = self.pod_select.value
        if pod is None:
            return
        rec = self.t.pod(pod)
        learner = get_algo(rec["algo"])
        names = [
            f.name
            for f in dataclasses.fields(learner.config_cls)
            if f.name not in learner.structural_hparams
        ]
        if list(self.hparam_select.options) != names:
            self.hparam_select.options = names
            self.hparam_select.value = "lr" if "lr" in names else (names[0] if names else None)
        name = self.hparam_select.value
        if name is not None:
            self.hparam_value.placeholder = f"now {rec['hparams'].get(name)}"

    def _refresh_cluster(self) -> None:
        try:
            c = self.t.cluster_info()
        except Exception as exc:  # cluster gone: say so instead of breaking the refresh
            self._set(self.cluster, f"cluster unavailable: {fmt(str(exc))}")
            return
        link = (
            f'<a href="{fmt(c["dashboard"])}" target="_blank">Dask dashboard</a>'
            if c["dashboard"]
            else "no Dask dashboard"
        )
        self._set(
            self.cluster,
            (
                f"workers {c['workers']} · threads {c['threads']} · memory "
                f"{c['memory_bytes'] / 2**30:.1f} GiB · GPUs {c['gpus']}"
                + (f" ({c['pods_per_gpu']} pods each)" if c.get("pods_per_gpu") else "")
                + f" · pod slots {fmt(c.get('slots'))} · pods in flight "
                f"{c['pods_in_flight']} · {link}"
            ),
        )
        self.scale_up.disabled = self.scale_down.disabled = not c["can_scale"]

    def _refresh_lineage(self) -> None:
        self._set(
            self.lineage,
            schedule_html(self.t.schedule())
            + "<br>"
            + lineage_html(self.t.lineage().to_dict("records")),
        )

    def _refresh_curves(self, min_interval: float = 2.0) -> None:
        now = time.monotonic()
        if now - self._curve_drawn_at < min_interval:
            return
        history = self.t.history()
        events = [m for m in self.t.curves() if m.get("type") == "progress"]
        count = len(events) + len(history)
        if count == self._curve_count:
            return
        self._curve_count, self._curve_drawn_at = count, now
        self.curves.value = curves_png(
            history, events, self.t.spec.target_reward, self.t.spec.fitness
        )


def curves_png(history, events: list[dict[str, Any]], target: float | None, fitness: str) -> bytes:
    """:func:`curves_figure` as PNG bytes (what the Curves tab shows)."""
    import io

    fig = curves_figure(history, events, target, fitness)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return buf.getvalue()


def curves_figure(history, events: list[dict[str, Any]], target: float | None, fitness: str):
    """Two panels. Left, the fitness the leaderboard ranks (each segment's evaluation,
    ``Tournament.history()``) against tournament time: one line per pod, a child's line
    starting at the parent's point it was forked from, the target dashed. Right, the
    training-episode returns (``Tournament.curves()``) against env steps. Training
    returns alone misled: exploration noise keeps them far below what the deterministic
    evaluation that ranks pods scores."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # Figure, not pyplot: pyplot's global state is not safe in a background thread.
    fig = Figure(figsize=(11.5, 3.4))
    FigureCanvasAgg(fig)
    ax_f, ax_s = fig.subplots(1, 2)
    rows = history.to_dict("records") if len(history) else []
    by_pod: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_pod.setdefault(r["pod"], []).append(r)
    pods = sorted(set(by_pod) | {m["pod"] for m in events if m.get("train_return") is not None})
    # one colour per pod in both panels, 20 distinct ones (matplotlib's cycle repeats
    # after 10, and 30 pods made three lines of each colour)
    palette = colormaps["tab20"]
    color = {pod: palette(i % 20) for i, pod in enumerate(pods)}
    for pod, rs in sorted(by_pod.items()):
        first = rs[0]
        fork = [
            p
            for p in by_pod.get(first["parent"] or "", [])
            if p["segment"] == first["fork_segment"]
        ]
        pts = [*fork[:1], *rs]
        pts = [p for p in pts if p["score"] is not None and math.isfinite(p["score"])]
        if pts:
            xs, ys = [p["time"] for p in pts], [p["score"] for p in pts]
            ax_f.plot(xs, ys, marker=".", label=pod, color=color[pod])
    if target is not None:
        ax_f.axhline(target, color="black", linestyle="--", linewidth=1, label="target")
    label = "mean evaluation return" if fitness == "return" else f"evaluation {fitness}"
    ax_f.set(xlabel="tournament time (s)", ylabel=f"fitness: {label}")
    by_pod_t: dict[str, list[dict[str, Any]]] = {}
    for m in events:
        if m.get("train_return") is not None:
            by_pod_t.setdefault(m["pod"], []).append(m)
    steps = [m["env_steps"] for ms in by_pod_t.values() for m in ms if m["env_steps"] > 0]
    for pod, ms in sorted(by_pod_t.items()):
        xs, ys = [m["env_steps"] for m in ms], [m["train_return"] for m in ms]
        ax_s.plot(xs, ys, label=pod, color=color[pod])
    if steps and max(steps) > 100 * min(steps):
        ax_s.set_xscale("log")  # children start deep into their parents' steps
    ax_s.set(xlabel="env steps", ylabel="training episodic return")
    columns = max(1, math.ceil(len(by_pod) / 12))  # of the legend: 12 pods a column
    right = 1.0 - 0.085 * columns if by_pod else 0.98
    fig.subplots_adjust(left=0.07, right=right, bottom=0.16, top=0.95, wspace=0.28)
    if by_pod:  # beside the data, never on it
        handles, labels = ax_f.get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            fontsize="x-small",
            ncol=columns,
            loc="upper left",
            bbox_to_anchor=(right + 0.005, 0.95),
            borderaxespad=0.0,
        )
    return fig
