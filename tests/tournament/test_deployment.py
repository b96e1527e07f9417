"""One deployment path: a pod, a run folder, a checkpoint, a store or a tournament
resolve to the same policy, the spec it trained with and how it was selected; a store's
checkpoint is checked against the store's record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from elegantpod.config import PodSpec
from elegantpod.pod.checkpoint import CheckpointError
from elegantpod.pod.pod import Pod
from elegantpod.policy.policy import Policy
from elegantpod.tournament.deployment import Deployment, Selection
from tests.tournament.store.test_hostile_store import entry, make_store, record

OBS = np.array([[0.01, -0.02, 0.03, 0.0], [0.1, 0.2, -0.1, 0.05]], dtype=np.float32)


@pytest.fixture(scope="module")
def pod():
    with Pod(PodSpec(env_id="CartPole-v1", algo="ppo", seed=3, eval_episodes=1)) as p:
        yield p


def _store(root: Path, pod: Pod, *, scored: int = 5, best: str = "p003") -> Path:
    """A store as a finished tournament leaves it (written directly, no cluster): ``scored``
    pods scored once each, ``best`` the leader, ``pod``'s checkpoint its file."""
    pods = [
        record(f"p{i:03d}", seed=i, parent=None if i < 2 else "p001", segment=1,
               history=[{"segment": 1, "env_steps": 2048, "score": float(i), "time": float(i)}])
        for i in range(scored)
    ]  # fmt: skip
    leader = entry(best, score_mean=3.0, score_std=0.0, parent="p001")
    make_store(root, pods=pods, leaderboard=[leader], state={"elapsed_seconds": 5.0})
    ckpt = root / leader["checkpoint"]
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(Path(pod.save(root.parent / f"{root.name}.pt")).read_bytes())
    return ckpt


def test_a_live_pod_deploys_its_current_policy_with_no_selection(pod):
    d = Deployment.of(pod)
    assert d.live and d.checkpoint is None and d.layout is None
    assert d.spec is pod.spec and d.env_steps == pod.env_steps
    assert d.selection == Selection() and d.selection.as_dict() == {}
    want = Policy.from_pod(pod).predict(OBS)[0]
    assert (d.policy.predict(OBS)[0] == want).all()


def test_a_run_folder_and_its_checkpoint_deploy_the_same_agent(pod, tmp_path):
    pod.save(tmp_path / "run" / "best.pt")
    folder, file = Deployment.of(tmp_path / "run"), Deployment.of(tmp_path / "run" / "best.pt")
    assert folder.checkpoint == file.checkpoint == str(tmp_path / "run" / "best.pt")
    assert not folder.live and folder.selection.trials is None  # nobody we know chose it
    assert folder.spec.env_id == "CartPole-v1" and folder.env_steps == pod.env_steps
    assert (folder.policy.predict(OBS)[0] == Policy.from_pod(pod).predict(OBS)[0]).all()
    with pytest.raises(TypeError, match="an agent must be a Pod, a Tournament, a store"):
        Deployment.of(42)
    with pytest.raises(CheckpointError, match=r"Deployment\.of\(store\)"):
        Deployment.of(tmp_path)  # a folder that is neither a run nor a store


def test_a_store_deploys_its_best_agent_with_the_stores_selection(pod, tmp_path):
    root = tmp_path / "store"
    ckpt = _store(root, pod)
    d = Deployment.of(root)
    assert d.checkpoint == str(ckpt) and not d.live
    s = d.selection
    assert (s.trials, s.pod, s.name, s.score, s.fitness) == (5, "p003", "PPO p003", 3.0, "return")
    assert s.trial_scores == (0.0, 1.0, 2.0, 3.0, 4.0)
    assert [e["pod"] for e in s.lineage] == ["p003", "p001"]
    assert s.as_dict()["tournament_store"] == s.store
    # a checkpoint inside the store carries the store's selection, named by its pod
    inside = Deployment.of(ckpt)
    assert inside.selection.trials == 5 and inside.selection.pod == "p003"
    # a checkpoint that is not what the store's record says is refused
    other = Pod(PodSpec(env_id="CartPole-v1", algo="dqn", eval_episodes=1))
    ckpt.write_bytes(Path(other.save(tmp_path / "dqn.pt")).read_bytes())
    other.close()
    with pytest.raises(ValueError, match="its record in the store says 'ppo'"):
        Deployment.of(root)
    with pytest.raises(ValueError, match="its record in the store says 'ppo'"):
        Deployment.of(ckpt)


def test_an_empty_store_has_no_agent_to_deploy(tmp_path):
    make_store(tmp_path / "empty")
    with pytest.raises(ValueError, match="no agent on its leaderboard yet"):
        Deployment.of(tmp_path / "empty")
