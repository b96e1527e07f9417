"""run_segment in-process (no Dask): the unit that workers run, on a URL store too."""

import dataclasses
import re

import pytest

from elegantpod import Tournament, TournamentFailed
from elegantpod.agents.ppo import PPOConfig
from elegantpod.config import PodSpec
from elegantpod.envs.user_gym import as_env_id
from elegantpod.pod.checkpoint import checkpoint_exists, load_checkpoint
from elegantpod.pod.finite import NonFiniteError
from elegantpod.tournament.store.store import Store
from elegantpod.tournament.worker.segment import SegmentTask, run_segment
from tests.pod.test_finite import HugeObs, NanObs

SPEC = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=PPOConfig(num_envs=8, horizon=32), seed=3)


def task(store, seg, resume_from=None, **kw):
    return SegmentTask(
        tournament_id="t",
        pod_id="p000",
        segment=seg,
        spec_json=SPEC.to_json(),
        checkpoint=store.checkpoint("p000", seg),
        resume_from=resume_from,
        segment_steps=1024,
        **kw,
    )


def test_segments_chain_through_an_fsspec_url_store():
    store = Store("memory://elegantpod-segment-test/run")
    store.ensure()
    first = run_segment(task(store, 1))
    assert first.checkpoint.startswith("memory://") and first.env_steps == 1024
    second = run_segment(task(store, 2, resume_from=first.checkpoint))
    assert second.env_steps == 2048 and second.env_steps_delta == 1024
    assert load_checkpoint(second.checkpoint)["env_steps"] == 2048


def test_a_rerun_of_a_finished_segment_reuses_its_checkpoint(tmp_path):
    store = Store(tmp_path)
    store.ensure()
    first = run_segment(task(store, 1))
    again = run_segment(task(store, 1))  # e.g. Dask re-ran it after a worker death
    assert again.env_steps == first.env_steps and again.env_steps_delta == 0


def test_child_copies_parent_weights_but_keeps_its_own_seed(tmp_path):
    store = Store(tmp_path)
    store.ensure()
    parent = run_segment(task(store, 1))
    child = SegmentTask(
        tournament_id="t",
        pod_id="p001",
        segment=1,
        spec_json=SPEC.to_json(),
        checkpoint=store.checkpoint("p001", 1),
        parent_checkpoint=parent.checkpoint,
        segment_steps=1024,
    )
    res = run_segment(child)
    assert res.env_steps == 2048  # the parent's experience is inherited


def _publish_burst(n: int) -> tuple[int, int]:
    """On a worker: publish ``n`` progress events back to back; (messages built, sent)."""
    from elegantpod.tournament.worker.channels import Events

    events = Events("elegantpod-test-burst", "p000", 1)
    events.last = 0.0  # as if the last event were long ago: the first one goes out
    built = 0

    def message():
        nonlocal built
        built += 1
        return {"type": "progress"}

    for _ in range(n):
        events.publish(message)
    return built, events.sent


def test_rate_limited_progress_drains_nothing_into_dropped_events(client):
    # Building a progress message drains the training returns since the last one; a
    # message built and then dropped by the rate limit lost those returns before.
    built, sent = client.submit(_publish_burst, 200, pure=False).result()
    assert sent == 1 and built == sent


def test_an_off_policy_pod_keeps_its_replay_only_in_its_newest_checkpoint(tmp_path):
    from elegantpod.agents.sac import SACConfig

    spec = PodSpec(
        env_id="Pendulum-v1",
        algo="sac",
        hparams=SACConfig(num_envs=4, learning_starts=64, batch_size=32),
        seed=1,
    )
    store = Store(tmp_path / "s")
    store.ensure()

    def sac_task(seg, resume_from=None):
        return SegmentTask(
            tournament_id="t",
            pod_id="p000",
            segment=seg,
            spec_json=spec.to_json(),
            checkpoint=store.checkpoint("p000", seg),
            resume_from=resume_from,
            segment_steps=400,
        )

    first = run_segment(sac_task(1))
    full = (tmp_path / "s/pods/p000/seg-00001.pt").stat().st_size
    second = run_segment(sac_task(2, resume_from=first.checkpoint))
    assert "replay" in load_checkpoint(second.checkpoint)["learner"]
    assert "replay" not in load_checkpoint(first.checkpoint)["learner"]
    # 400 transitions of at least 7 float32 each (obs, next obs, action) are gone
    assert (tmp_path / "s/pods/p000/seg-00001.pt").stat().st_size < full - 400 * 7 * 4
    third = run_segment(sac_task(3, resume_from=second.checkpoint))  # resumes with its replay
    assert third.env_steps > second.env_steps > first.env_steps
    assert "replay" not in load_checkpoint(second.checkpoint)["learner"]


# -- issue 30: captures and replays reported; control reads off the training thread -------
def test_a_segment_reports_its_captures_and_replays_and_the_summary_sums_them(tmp_path):
    import dataclasses

    from elegantpod.tournament.core import views
    from elegantpod.tournament.core.population import Population
    from elegantpod.tournament.core.spec import TournamentSpec

    store = Store(tmp_path)
    store.ensure()
    res = run_segment(task(store, 1))
    assert (res.captures, res.replays) == (0, 0)  # a CPU pod trains eagerly
    population = Population(TournamentSpec(env_id="CartPole-v1", algos=("ppo",), pods=1))
    (rec,) = population.fill()
    population.submitted(rec)
    on_a_gpu = dataclasses.replace(res, pod_id=rec.pod_id, captures=1, replays=7)
    population.on_result(on_a_gpu, ending=False, stopping=False)
    population.on_result(dataclasses.replace(on_a_gpu, segment=2), ending=False, stopping=False)
    out = views.summary(population, str)
    assert (out["captures"], out["replays"]) == (2, 14)


def _control_reads(name: str) -> tuple[list[str], bool, int]:
    """As a segment does: 200 control reads on this (the training) thread while the
    poller fetches in the background; then a newer message. Returns the threads every
    ``Variable.get`` ran on, whether the stop arrived, and the poller's fetches."""
    import threading
    import time

    from distributed import Variable

    from elegantpod.tournament.worker.channels import Control

    var = Variable(name)
    var.set({"state": "running", "version": 1})
    control = Control(name)
    getters: list[str] = []
    real_get = control.var.get

    def counted_get(*args, **kwargs):  # the real round trip, and who made it
        getters.append(threading.current_thread().name)
        return real_get(*args, **kwargs)

    control.var.get = counted_get
    try:
        for _ in range(200):  # half a second or more of reads: the poller's round trips
            control.next()  # run meanwhile, on their own thread
            control.stop_requested()
            time.sleep(0.0025)
        var.set({"state": "stopped", "version": 2})
        deadline = time.monotonic() + 30  # "did not hang"; it takes about a second
        while not control.stop_requested() and time.monotonic() < deadline:
            time.sleep(0.005)
        return getters, control.stop_requested(), control.fetches
    finally:
        control.close()


def test_control_reads_never_wait_on_the_scheduler(client):
    # in this process (torch is imported here already), through the real scheduler
    import threading

    getters, stopped, fetches = _control_reads("elegantpod-test-control")
    assert fetches >= 2  # the poller kept fetching in the background...
    assert getters and threading.current_thread().name not in getters  # ...never this thread
    assert all(name.startswith("elegantpod-control-") for name in getters)
    assert stopped  # a new command arrives (within about a second: POLL_SECONDS)


def test_a_control_message_of_another_shape_is_refused_and_the_last_one_kept(client):
    import time

    from distributed import Variable

    from elegantpod.tournament.core.protocol import PodStatus
    from elegantpod.tournament.worker.channels import Control

    def wait(until) -> None:
        deadline = time.monotonic() + 10
        while not until() and time.monotonic() < deadline:
            time.sleep(0.01)

    name = "elegantpod-test-control-refused"
    var = Variable(name)
    var.set({"state": "paused", "version": 1})
    control = Control(name)
    try:
        wait(lambda: control.latest is not None)
        var.set({"state": "dance", "version": 2})
        wait(lambda: control.refused is not None)
        assert "state must be one of 'running', 'paused', 'stopped'" in control.refused
        assert control.latest.state is PodStatus.PAUSED and control.latest.version == 1
        assert not control.stop_requested()
        var.set({"state": "stopped", "version": 3})
        wait(control.stop_requested)
        assert control.stop_requested() and control.latest.version == 3
    finally:
        control.close()


@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_a_segment_whose_env_poisons_its_pod_fails_naming_it_and_writes_nothing(tmp_path):
    store = Store(tmp_path)
    store.ensure()
    spec = PodSpec(env_id=as_env_id(NanObs), algo="ppo", hparams=PPOConfig(num_envs=4, horizon=32))
    named = r"(?s)observations are NaN.*tournament pod p000, segment 1"
    with pytest.raises(NonFiniteError, match=named):
        run_segment(dataclasses.replace(task(store, 1), spec_json=spec.to_json()))
    assert not checkpoint_exists(store.checkpoint("p000", 1))


@pytest.mark.parametrize("env, algo", [(NanObs, "ppo"), (HugeObs, "dqn")])
@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_a_tournament_whose_env_poisons_every_pod_fails_and_keeps_no_bad_checkpoint(
    client, tmp_path, env, algo
):
    """Every pod fails alike at its first segment: the run ends ``failed`` (not
    ``finished``) with the reason, and the store holds no checkpoint the loader refuses
    (none at all: no pod kept a state)."""
    hp = {"ppo": {"num_envs": 4, "horizon": 32}, "dqn": {"num_envs": 4, "learning_starts": 64}}
    t = Tournament(
        env,
        [algo],
        pods=2,
        max_steps=8192,
        segment_steps=512,
        eval_episodes=2,
        hparams={algo: hp[algo]},
        store=tmp_path / "s",
        client=client,
    )
    t.start()
    with pytest.raises(TournamentFailed) as failed:
        t.wait(timeout=120)
    s = failed.value.summary
    assert s["status"] == "failed", s
    # pods failing alike: counted once, by their reason, which says what the env did
    why = "NonFiniteError: training went non-finite: the env's observations are"
    assert re.match(rf"every pod failed: \d+ x {why}", s["error"]), s["error"]
    assert s["error"].count("non-finite") == 2, s["error"]  # the reason, and one's details
    assert s["pods_failed"] >= 2 and s["env_steps_total"] == 0, s
    assert sorted((tmp_path / "s").rglob("*.pt")) == []


def _crossing(tmp_path, name, target, confirm, seed=3):
    spec = dataclasses.replace(SPEC, target_reward=target, seed=seed)
    store = Store(tmp_path / name)
    store.ensure()
    t = dataclasses.replace(task(store, 1), spec_json=spec.to_json(), confirm_target=confirm)
    return run_segment(t)


def test_a_crossing_of_the_target_counts_only_when_fresh_episodes_confirm_it(tmp_path):
    """Issue 58: a lucky evaluation must not end a tournament. The confirming evaluation
    runs on the next evaluation's seeds; only if it too reaches the target is it solved."""
    plain = _crossing(tmp_path, "plain", -1e9, confirm=False)
    assert plain.solved and plain.confirm_score is None
    high = _crossing(tmp_path, "high", 1e9, confirm=True)
    assert not high.solved and high.confirm_score is None  # no crossing: nothing to confirm
    for seed in range(3, 12):  # a pod whose first evaluation is luckier than the next
        low = _crossing(tmp_path, f"low{seed}", -1e9, confirm=True, seed=seed)
        assert low.solved and low.confirm_score is not None
        if low.score_mean > low.confirm_score:
            break
    else:
        pytest.fail("no seed of 3..11 gave a first evaluation above the next one")
    lucky = _crossing(tmp_path, f"lucky{seed}", low.score_mean, confirm=True, seed=seed)
    assert lucky.score_mean == low.score_mean  # crossed, on the same episodes
    assert lucky.confirm_score == low.confirm_score and not lucky.solved
    assert lucky.eval_seconds > 0
    unconfirmed = _crossing(
        tmp_path, f"unconfirmed{seed}", low.score_mean, confirm=False, seed=seed
    )
    assert unconfirmed.solved
