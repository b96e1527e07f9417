import dataclasses
import math
import sys
import threading

import pytest
import torch

from elegantpod.agents.ppo import PPOConfig
from elegantpod.agents.sac import SACConfig
from elegantpod.config import PodSpec
from elegantpod.pod.evaluator import Evaluator
from elegantpod.pod.hooks import PodHooks
from elegantpod.pod.pod import Pod


def test_budget_in_steps_and_progress_callback():
    seen = []
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", max_steps=8192, eval_every_steps=2048))
    result = pod.run(hooks=PodHooks(on_evaluation=lambda pod, p: seen.append(p)))
    assert result.env_steps == 8192 and not result.solved
    assert [p.env_steps for p in seen] == [2048, 4096, 6144, 8192]
    assert all(p.wall_seconds > 0 for p in seen)
    assert "losses/policy" in seen[-1].stats


def test_callback_false_stops_and_time_budget():
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", max_steps=10**7, eval_every_steps=2048))
    result = pod.run(hooks=PodHooks(on_evaluation=lambda pod, p: False))
    assert result.env_steps == 2048
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", max_seconds=0.5))
    result = pod.run()
    assert result.wall_seconds >= 0.5  # stopped by the clock (a hang: pytest-timeout)
    assert result.env_steps > 0
    assert math.isfinite(result.eval_return_mean)


def test_evaluator_runs_at_least_ten_deterministic_episodes():
    pod = Pod(PodSpec(env_id="Pendulum-v1", algo="sac"))
    ev = Evaluator("Pendulum-v1", 12, "cpu", seed=0)
    res = ev.evaluate(pod.learner)
    assert len(res.returns) == 12 and all(n == 200 for n in res.lengths)
    assert res.std > 0  # different start states
    again = Evaluator("Pendulum-v1", 12, "cpu", seed=0).evaluate(pod.learner)
    assert res.returns == again.returns  # reproducible


def test_same_seed_same_run():
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", seed=7, max_steps=4096, eval_every_steps=4096)
    a, b = Pod(spec).run(), Pod(spec).run()
    assert a.eval_return_mean == b.eval_return_mean


def test_gymnasium_env_through_the_adapter_in_a_pod():
    pod = Pod(
        PodSpec(
            env_id="MountainCar-v0",
            algo="ppo",
            max_steps=1024,
            eval_episodes=2,
            eval_every_steps=1024,
            hparams=PPOConfig(num_envs=8, horizon=64),
        )
    )
    result = pod.run()
    assert result.env_steps == 1024 and result.eval_return_mean == pytest.approx(-200.0)


def test_bad_spec_values_are_named():
    with pytest.raises(ValueError, match="eval_episodes must be > 0, got 0"):
        Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=0))
    with pytest.raises(ValueError, match="max_seconds must be > 0"):
        Pod(PodSpec(env_id="CartPole-v1", algo="ppo", max_seconds=-1))
    with pytest.raises(ValueError, match="unknown algorithm"):
        Pod(PodSpec(env_id="CartPole-v1", algo="a3c"))
    assert torch.get_num_threads() >= 1


def test_eval_episodes_past_the_limit_are_refused_before_any_env():
    with pytest.raises(ValueError, match="eval_episodes must be <= 10,000"):
        Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=10**9))


@pytest.mark.parametrize("learners", [1, 2])
def test_a_stop_request_reaches_a_pod_inside_a_long_update(learners):
    """1000 epochs of 32 minibatches: a minute in one update, unless the stop gets in."""
    hp = PPOConfig(epochs=1000, minibatch_size=64)
    pod = Pod(
        PodSpec(env_id="CartPole-v1", algo="ppo", max_steps=2048, hparams=hp, learners=learners)
    )
    polls = []  # one per gradient step: the learner polls between them
    hooks = PodHooks(should_stop=lambda: polls.append(1) and False)
    timer = threading.Timer(0.5, hooks.request_stop)
    timer.start()
    result = pod.run(hooks=hooks)
    timer.join()
    assert result.env_steps == 2048 and hooks.stop_requested
    # the update has 1000 x 32 gradient steps; the stop ended it after a fraction
    assert 0 < len(polls) < 1000 * 32 // 2, len(polls)
    assert pod.learner.should_stop() is False  # the run's hooks are gone after it


def test_should_stop_is_polled_between_gradient_steps():
    calls = []

    def should_stop() -> bool:  # as a tournament segment reads its control variable
        calls.append(1)
        return len(calls) > 10

    hp = SACConfig(learning_starts=64, replay_ratio=100.0, batch_size=32)
    pod = Pod(PodSpec(env_id="Pendulum-v1", algo="sac", max_steps=10**6, hparams=hp))
    result = pod.run(hooks=PodHooks(should_stop=should_stop))
    assert result.env_steps == 64  # one rollout; its update owed 6400 gradient steps
    assert pod.learner.gradient_steps == 10
    assert pod.learner.should_stop() is False  # the pod's check is gone after the run


# -- randomness is per pod --------------------------------------------------------------
RNG_CASES = [
    ("ppo", "CartPole-v1", PPOConfig(num_envs=8, horizon=32, minibatch_size=64)),
    ("sac", "Pendulum-v1", SACConfig(num_envs=4, horizon=16, learning_starts=256, batch_size=64)),
]


def _record(spec: PodSpec) -> tuple[list, list, dict]:
    """Build and train a pod; return every rollout, every update's stats, final weights."""
    rollouts, stats = [], []

    def on_iteration(pod, s):
        rollouts.append((pod.collector.buffer.obs.clone(), pod.collector.buffer.action.clone()))
        stats.append(dict(s))

    pod = Pod(spec)
    pod.run(hooks=PodHooks(on_update=on_iteration))
    weights = {
        f"{name}.{k}": v.clone()
        for name, m in pod.learner.modules.items()
        for k, v in m.state_dict().items()
    }
    return rollouts, stats, weights


def _assert_same_run(a, b) -> None:
    (rollouts_a, stats_a, weights_a), (rollouts_b, stats_b, weights_b) = a, b
    assert len(rollouts_a) == len(rollouts_b) and stats_a == stats_b
    for (obs_a, act_a), (obs_b, act_b) in zip(rollouts_a, rollouts_b, strict=True):
        assert torch.equal(obs_a, obs_b) and torch.equal(act_a, act_b)
    assert weights_a.keys() == weights_b.keys()
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)


@pytest.mark.parametrize(("algo", "env", "hp"), RNG_CASES)
def test_pods_sharing_a_process_repeat_their_solo_runs(algo, env, hp):
    """Two pods in two threads of one process (as on a Dask worker), next to a thread that
    reseeds and draws from torch's global RNG, do exactly what each does alone."""
    specs = [
        PodSpec(env_id=env, algo=algo, seed=seed, hparams=hp, max_steps=1024, eval_episodes=2)
        for seed in (1, 2)
    ]
    alone = [_record(spec) for spec in specs]
    assert alone[0][1] != alone[1][1]  # different seeds, different runs

    together: list = [None, None]
    start, quiet = threading.Barrier(3), threading.Event()

    def train(i: int) -> None:
        start.wait()
        together[i] = _record(specs[i])

    def neighbour() -> None:  # another task on the same worker, using the global RNG
        start.wait()
        n = 0
        while not quiet.is_set():
            n += 1
            torch.manual_seed(n)
            torch.rand(64)

    threads = [threading.Thread(target=train, args=(i,)) for i in range(2)]
    noisy = threading.Thread(target=neighbour)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # interleave the threads finely
    try:
        for t in (*threads, noisy):
            t.start()
        for t in threads:
            t.join()
    finally:
        quiet.set()
        noisy.join()
        sys.setswitchinterval(interval)
    for i in range(2):
        _assert_same_run(together[i], alone[i])


def test_a_pod_leaves_the_process_rng_alone(tmp_path):
    torch.manual_seed(12345)
    before = torch.get_rng_state()
    for algo, env, hp in RNG_CASES:
        spec = PodSpec(env_id=env, algo=algo, hparams=hp, max_steps=512, eval_episodes=2)
        pod = Pod(spec, out_dir=tmp_path / algo)
        pod.run()
        Pod(spec, out_dir=tmp_path / algo, resume=True).evaluate()
    assert torch.equal(torch.get_rng_state(), before)


# -- resume -----------------------------------------------------------------------------
def test_a_resumed_pod_evaluates_as_the_uninterrupted_one(tmp_path):
    hp = PPOConfig(num_envs=8, horizon=32)
    spec = PodSpec(env_id="Pendulum-v1", algo="ppo", max_steps=1024, eval_every_steps=256)
    spec = dataclasses.replace(spec, hparams=hp, eval_episodes=4)
    pod = Pod(spec, out_dir=tmp_path)
    pod.run()  # four evaluations, then a checkpoint
    assert pod.evaluator.count == 4
    resumed = Pod(spec, out_dir=tmp_path, resume=True)
    assert resumed.evaluator.count == 4
    for _ in range(2):  # the same episode seeds, the same weights: the same numbers
        assert resumed.evaluate() == pod.evaluate()
    # a child copying its parent keeps its own evaluation seeds
    child = Pod(dataclasses.replace(spec, seed=5))
    child.load(pod.checkpoint_path, restore_rng=False)
    assert child.evaluator.count == 0


# -- a pod kept built between runs --------------------------------------------------------
def _weights(pod: Pod) -> dict[str, torch.Tensor]:
    return {
        f"{name}.{k}": v.clone()
        for name, m in pod.learner.modules.items()
        for k, v in m.state_dict().items()
    }


@pytest.mark.parametrize(("algo", "env", "hp"), RNG_CASES)
def test_restarted_episodes_continue_as_a_pod_rebuilt_from_the_checkpoint(algo, env, hp, tmp_path):
    """What a tournament relies on when it keeps a pod built between segments."""
    per_rollout = hp.num_envs * hp.horizon
    spec = PodSpec(
        env_id=env,
        algo=algo,
        hparams=hp,
        seed=3,
        max_steps=40 * per_rollout,
        eval_every_steps=per_rollout,
        eval_episodes=2,
    )
    kept = Pod(spec)
    updates = []
    kept.run(
        hooks=PodHooks(
            on_update=lambda pod, stats: updates.append(stats) if len(updates) < 1 else False
        )
    )
    assert kept.env_steps == 2 * per_rollout and kept.evaluator.count == 1 and kept.curve
    kept.save(tmp_path / "ckpt.pt")
    rebuilt = Pod(spec)
    rebuilt.load(tmp_path / "ckpt.pt")
    kept.restart_episodes()
    assert kept.curve == [] and kept.last_eval is None
    assert kept.env_steps == 2 * per_rollout and kept.evaluator.count == 1  # kept as they were

    segment = dataclasses.replace(spec, max_steps=5 * per_rollout)
    for pod in (kept, rebuilt):
        pod.spec = segment  # the next segment's budget
    results = [pod.run() for pod in (kept, rebuilt)]
    assert results[0].env_steps == results[1].env_steps == 5 * per_rollout
    curves = [
        [(p.eval_return_mean, p.train_return_mean, p.stats) for p in r.curve] for r in results
    ]
    assert len(curves[0]) == 3 and curves[0] == curves[1]
    a, b = _weights(kept), _weights(rebuilt)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_apply_hparams_switches_live_ones_and_refuses_structural_ones():
    hp = PPOConfig(num_envs=4, horizon=16)
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", hparams=hp, max_steps=64))
    pod.apply_hparams(dataclasses.replace(hp, lr=1e-4, ent_coef=0.05))
    assert pod.learner.config.lr == 1e-4 and pod.learner.config.ent_coef == 0.05
    assert pod.spec.hparams.lr == 1e-4
    assert all(g["lr"] == 1e-4 for g in pod.learner.optimizers["ppo"].param_groups)
    with pytest.raises(ValueError, match=r"hidden: \(64, 64\) -> \(32,\)"):
        pod.apply_hparams(dataclasses.replace(hp, lr=1e-3, hidden=(32,)))
    assert pod.learner.config.lr == 1e-4  # unchanged after the refusal
    with pytest.raises(ValueError, match="must be a PPOConfig"):
        pod.apply_hparams(SACConfig())
    with pytest.raises(ValueError, match="num_envs: 4 -> "):  # None: the defaults
        pod.apply_hparams(None)
    assert pod.run().env_steps == 64


def _hopper_checkpoint(tmp_path, **env_kwargs):
    """A real Hopper-v5 SAC checkpoint (untrained) whose spec then names ``env_kwargs``,
    as a checkpoint from someone else could."""
    import json

    spec = PodSpec(
        env_id="Hopper-v5",
        algo="sac",
        hparams=SACConfig(num_envs=1, buffer_size=1000, hidden=(8,)),
        eval_episodes=1,
    )
    path = Pod(spec).save(tmp_path / "clean.pt")
    data = torch.load(path, weights_only=True)
    saved = json.loads(data["spec"])
    saved["env_kwargs"].update(env_kwargs)
    data["spec"] = json.dumps(saved)
    torch.save(data, tmp_path / "crafted.pt")
    return tmp_path / "crafted.pt"


def test_a_model_file_that_a_checkpoint_names_is_never_read_nor_quoted(tmp_path):
    """Issue 29, item 2: a checkpoint's ``xml_file`` opened a local file and the error
    quoted it; now it is refused unless the user names it, and never quoted."""
    from pathlib import Path

    import gymnasium

    from elegantpod.pod.checkpoint import CheckpointError

    secret = tmp_path / "model.xml"
    secret.write_text("<secret_token_ABC123/>")
    crafted = _hopper_checkpoint(tmp_path, xml_file=str(secret))
    with pytest.raises(CheckpointError, match=r"model\.xml' as spec\.env_kwargs\.xml_file") as e:
        Pod.from_checkpoint(crafted)
    assert "secret_token" not in str(e.value)
    # passed by the user, or trusted: read, and its parse error still does not quote it
    for kwargs in ({"env_kwargs": {"xml_file": str(secret)}}, {"allow_remote": True}):
        with pytest.raises(ValueError, match=r"'Hopper-v5' with xml_file=.*model\.xml") as e:
            Pod.from_checkpoint(crafted, **kwargs)
        assert "secret_token" not in str(e.value)
    # a valid model elsewhere is refused too, and loads when the user passes it
    hopper = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "hopper.xml"
    valid = tmp_path / "valid.xml"
    valid.write_text(hopper.read_text())
    crafted = _hopper_checkpoint(tmp_path, xml_file=str(valid))
    with pytest.raises(CheckpointError, match="valid.xml' as spec.env_kwargs.xml_file"):
        Pod.from_checkpoint(crafted)
    pod = Pod.from_checkpoint(crafted, env_kwargs={"xml_file": str(valid)})
    assert pod.spec.env_kwargs == {"xml_file": str(valid)}
    # gymnasium's own model, by its bare name, needs nothing from the user
    assert Pod.from_checkpoint(_hopper_checkpoint(tmp_path, xml_file="hopper.xml")).env_steps == 0


def test_a_restarted_static_path_pod_continues_as_one_rebuilt_from_its_checkpoint(tmp_path):
    """The path a captured pod runs (its graphs kept across ``restart_episodes``, the
    learning rate a tensor), eagerly on a CPU: a resident segment's next iterations are
    those of a pod rebuilt from the checkpoint, bit for bit."""
    from elegantpod.agents.ppo import PPOConfig
    from elegantpod.pod.capture import IterationGraphs

    hp = PPOConfig(num_envs=8, horizon=16, minibatch_size=64, epochs=2)
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=hp, seed=3, capture=False)

    def static_pod() -> Pod:
        pod = Pod(spec)
        pod.graphs = IterationGraphs(pod.collector, pod.learner, capture=False)
        return pod

    kept = static_pod()
    for _ in range(2):
        kept.graphs.run()
    kept.save(tmp_path / "ckpt.pt")
    rebuilt = static_pod()
    rebuilt.load(tmp_path / "ckpt.pt")
    kept.restart_episodes()
    for pod in (kept, rebuilt):
        pod.apply_hparams(dataclasses.replace(hp, lr=1e-3, ent_coef=0.01))
    for _ in range(3):
        assert kept.graphs.run() == rebuilt.graphs.run()
    a, b = _weights(kept), _weights(rebuilt)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_pod_has_a_short_repr(tmp_path):
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", seed=3, device="cpu", max_steps=2048)
    pod = Pod(spec)
    assert repr(pod) == "Pod(ppo on CartPole-v1, seed 3, cpu, 0 env steps)"
    pod.run()
    assert repr(pod).startswith(
        "Pod(ppo on CartPole-v1, seed 3, cpu, 2,048 env steps, last return "
    )
    saved = Pod(spec, out_dir=tmp_path)
    saved.run()
    text = repr(saved)
    assert f"best return {saved.best_score:.4g}, out {str(tmp_path)!r})" in text, text
