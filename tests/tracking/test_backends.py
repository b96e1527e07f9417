"""One tiny tournament logged to TensorBoard, MLflow and W&B at once (and to a logger
that fails), each read back with its own library's reader; and ``train --track``.

The libraries are the real ones, writing local files (W&B offline: no network)."""

import glob
import json
import struct
from pathlib import Path

import pytest

from elegantpod import Tournament
from elegantpod.tracking import MLflowLogger, TensorBoardLogger, WandbLogger
from elegantpod.tracking.base import Logger

TINY_PPO = {"ppo": {"num_envs": 8, "horizon": 16}}


class Down(Logger):
    """A user's logger whose server is down: every metric fails."""

    name = "down"

    def log_metrics(self, run_id, metrics, step):
        raise ConnectionError("tracking server down")


@pytest.fixture(scope="module")
def run(client, tmp_path_factory):
    """The tournament (2 pods, 3 segments each) and where each backend wrote."""
    root = tmp_path_factory.mktemp("tracking")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("WANDB_API_KEY", raising=False)
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_DIR", str(root / "wb"))
        mp.setenv("WANDB_SILENT", "true")
        uri = f"sqlite:///{root / 'mlflow.db'}"
        loggers = [
            TensorBoardLogger(root / "tb"),
            MLflowLogger(uri),
            WandbLogger("tiny", dir=root / "wb"),
            Down(),
        ]
        t = Tournament(
            env="CartPole-v1",
            algos=["ppo"],
            pods=2,
            segment_steps=256,
            max_steps=2 * 256 * 3,
            eval_episodes=2,
            hparams=TINY_PPO,
            store=root / "s",
            client=client,
            loggers=loggers,
        )
        t.start()
        summary = t.wait(120)
    return t, summary, root, uri


def test_the_run_finishes_and_a_failing_logger_costs_a_warning(run):
    t, summary, _, _ = run
    assert summary["status"] == "finished", summary["error"]
    assert "logger 'down' disabled" in summary["warning"]
    assert "tracking server down" in t.warning


def _generation(t, pod) -> str:
    """A pod's depth in the lineage (0: a first pod), as the tag holds it."""
    parents = dict(zip(t.lineage()["pod"], t.lineage()["parent"], strict=True))
    depth = 0
    while parents.get(pod):
        pod, depth = parents[pod], depth + 1
    return str(depth)


def _history(t):
    return {pod: t.pod(pod)["history"] for pod in t.pods["pod_id"]}


def test_tensorboard_event_files_read_back(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t, _, root, _ = run
    (group,) = glob.glob(str(root / "tb" / "tournament-*"))
    losses = set()
    for pod, rows in _history(t).items():
        acc = EventAccumulator(f"{group}/{pod}", size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        tags = acc.Tags()["scalars"]
        # (a child made near the end may have finished no segment: no fitness yet)
        fitness = [(e.step, e.value) for e in acc.Scalars("fitness")] if rows else []
        assert fitness == [(h["env_steps"], pytest.approx(h["score"])) for h in rows]
        assert not rows or {"env_steps", "wall_seconds", "score_std"} <= set(tags)
        losses |= {tag for tag in tags if tag.startswith("losses/") or tag == "train_return"}
        lr = acc.Scalars("hparams/lr")[-1].value
        assert lr == pytest.approx(t.pod(pod)["hparams"]["lr"], rel=1e-6)
    # (a pod stopped by the tournament's end before its first update has none)
    assert {"train_return", "losses/value", "losses/policy"} <= losses
    acc = EventAccumulator(f"{group}/tournament", size_guidance={"tensors": 0})
    acc.Reload()
    text = acc.Tensors("leaderboard/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text.startswith("| rank | pod |") and f"| 1 | {t.leaderboard['pod'][0]} |" in text
    assert {"lineage/text_summary", "schedule/text_summary"} <= set(acc.Tags()["tensors"])


def test_mlflow_runs_read_back_with_mlflow_client(run):
    import mlflow.artifacts
    from mlflow import MlflowClient

    t, _, _, uri = run
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("elegantpod")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    (top,) = [r for r in runs.values() if r.data.tags["elegantpod.kind"] == "tournament"]
    assert top.data.params["env_id"] == "CartPole-v1"
    for pod, rows in _history(t).items():
        r = runs[pod]
        rec = t.pod(pod)
        assert r.data.tags["algo"] == "ppo" and r.data.tags["generation"] == _generation(t, pod)
        assert r.data.tags["mlflow.parentRunId"] == top.info.run_id
        assert r.info.status == "FINISHED"
        fitness = client.get_metric_history(r.info.run_id, "fitness")
        assert [(m.step, m.value) for m in fitness] == [(h["env_steps"], h["score"]) for h in rows]
        assert r.data.metrics["hparam/lr"] == pytest.approx(rec["hparams"]["lr"])
        if rec["mutation"]:  # a start pod mutated from the base settings
            (tag,) = [k for k in r.data.tags if k.startswith("mutation.")]
            assert json.loads(r.data.tags[tag]) == {k: list(v) for k, v in rec["mutation"].items()}
    base = top.info.artifact_uri
    board = json.loads(mlflow.artifacts.load_text(f"{base}/tables/leaderboard.json"))
    assert [row["pod"] for row in board] == list(t.leaderboard["pod"])
    lineage = json.loads(mlflow.artifacts.load_text(f"{base}/tables/lineage.json"))
    assert {row["pod"] for row in lineage} == set(t.pods["pod_id"])
    schedule = json.loads(mlflow.artifacts.load_text(f"{base}/tables/schedule.json"))
    assert schedule == json.loads(json.dumps(t.schedule()))


def wandb_records(path):
    """The records of a W&B transaction log (``run-*.wandb``), parsed with W&B's own
    protobuf schema: a LevelDB-style log (7-byte header, 32 KiB blocks of chunks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, chunk, out = Path(path).read_bytes(), 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header: padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or a record's last chunk
            rec = pb.Record()
            rec.ParseFromString(chunk)
            out.append(rec)
            chunk = b""
    return out


def test_wandb_offline_runs_read_back(run):
    t, _, root, _ = run
    runs = {}
    for folder in glob.glob(str(root / "wb" / "wandb" / "offline-run-*")):
        (log,) = glob.glob(f"{folder}/run-*.wandb")
        records = wandb_records(log)
        (head,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        rows = [
            {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
            for r in records
            if r.WhichOneof("record_type") == "history"
        ]
        runs[head.display_name] = (head, rows, folder)
    history, losses = _history(t), set()
    assert set(runs) == {*history, next(n for n in runs if n.endswith("-tournament"))}
    assert len({head.run_group for head, _, _ in runs.values()}) == 1
    for pod, rows in history.items():
        head, logged, _ = runs[pod]
        assert "algo:ppo" in head.tags
        fitness = [(r["env_steps"], r["fitness"]) for r in logged if "fitness" in r]
        assert fitness == [(h["env_steps"], pytest.approx(h["score"])) for h in rows]
        losses |= {k for r in logged for k in r if k.startswith("losses/")}
    assert {"losses/value", "losses/policy"} <= losses
    _, _, folder = runs[next(n for n in runs if n.endswith("-tournament"))]
    (table,) = glob.glob(f"{folder}/files/media/table/leaderboard_*.table.json")
    data = json.loads(Path(table).read_text())
    assert data["columns"][:2] == ["rank", "pod"]
    assert [row[1] for row in data["data"]] == list(t.leaderboard["pod"])


def test_train_tracks_to_tensorboard_from_the_command_line(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from elegantpod.cli.main import main

    tb = tmp_path / "tb"
    args = ["train", "--env", "CartPole-v1", "--algo", "ppo", "--max-steps", "512", "--quiet"]
    assert (
        main([*args, "--set", "num_envs=8", "--track", "tensorboard", "--track-to", str(tb)]) == 0
    )
    (run_dir,) = glob.glob(str(tb / "train-*" / "ppo-CartPole-v1-seed0"))
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    steps = [e.step for e in acc.Scalars("eval_return")]
    assert steps and steps[-1] == 512
    assert "final/eval_return_mean" in acc.Tags()["scalars"]
    assert main([*args, "--track-to", str(tb)]) == 2  # --track-to alone: refused


HOSTILE = '<img src=x onerror=alert(1)> [go](javascript:alert(1)) <a href="http://e">l</a> | ```'


def test_store_strings_reach_tensorboard_as_text_never_as_html(tmp_path):
    """Pod ids, mutation keys and origins come from a store: written through the real
    TensorBoard writer and rendered by TensorBoard's own Markdown sanitizer, a hostile
    string shows as its characters, with no link and no image (issue 42, item 7)."""
    from tensorboard import plugin_util
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path)
    logger.open("g", {"env": HOSTILE})
    logger.start_run("p000", HOSTILE, {"origin": HOSTILE}, {HOSTILE: 1.0})
    logger.log_params_change("p000", {HOSTILE: (HOSTILE, 2)}, 1)
    logger.log_tables({"leaderboard": [{"pod": HOSTILE, "score": 1.0}]})
    logger.close()
    rendered = []
    for run in ("tournament", "p000"):
        acc = EventAccumulator(str(tmp_path / "g" / run), size_guidance={"tensors": 0})
        acc.Reload()
        for tag in acc.Tags()["tensors"]:
            for event in acc.Tensors(tag):
                text = event.tensor_proto.string_val[0].decode()
                rendered.append(plugin_util.markdown_to_safe_html(text))
    assert len(rendered) == 4
    for html in rendered:
        tags = _tags(html)
        assert not {"a", "img"} & {t for t, _ in tags}, html
        assert not any(attrs for _, attrs in tags), html  # no href, src, onerror
    assert all("onerror=alert(1)" in html for html in rendered)  # shown, as text


def _tags(html: str) -> list[tuple[str, list]]:
    """The start tags of ``html``, with their attributes."""
    from html.parser import HTMLParser

    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    Tags().feed(html)
    return found
