"""One hooks object watches and stops a run (issue 33: there were five stop channels)."""

import threading

from elegantpod import Pod, PodSpec
from elegantpod.agents.ppo import PPOConfig
from elegantpod.pod.budget import Budget
from elegantpod.pod.hooks import PodHooks

HP = PPOConfig(num_envs=8, horizon=16, minibatch_size=64)
PER_ROLLOUT = 8 * 16


def _pod():
    return Pod(PodSpec(env_id="CartPole-v1", algo="ppo", hparams=HP, eval_episodes=2))


def test_a_subclass_sees_every_update_and_evaluation_and_stops():
    class Counting(PodHooks):
        def __init__(self):
            super().__init__()
            self.updates, self.evaluations = [], []

        def on_update(self, pod, stats):
            self.updates.append(pod.env_steps)
            return None  # go on

        def on_evaluation(self, pod, progress):
            self.evaluations.append(progress.env_steps)
            return len(self.evaluations) < 2  # False at the second: stop

    hooks = Counting()
    result = _pod().run(Budget(steps=100 * PER_ROLLOUT, evaluate_every=PER_ROLLOUT), hooks)
    assert hooks.updates == [PER_ROLLOUT, 2 * PER_ROLLOUT]
    assert (
        hooks.evaluations == [PER_ROLLOUT, 2 * PER_ROLLOUT] == [p.env_steps for p in result.curve]
    )


def test_functions_stop_a_run_too():
    pod = _pod()
    pod.run(
        Budget(steps=50 * PER_ROLLOUT),
        PodHooks(on_update=lambda p, s: p.env_steps < 3 * PER_ROLLOUT),
    )
    assert pod.env_steps == 3 * PER_ROLLOUT
    calls = []
    pod.run(
        Budget(steps=100 * PER_ROLLOUT),
        PodHooks(should_stop=lambda: calls.append(1) or len(calls) > 2),
    )
    assert pod.env_steps > 3 * PER_ROLLOUT and len(calls) >= 3


def test_request_stop_from_another_thread_and_the_learner_check_is_the_runs():
    pod = _pod()
    assert pod.learner.should_stop() is False  # outside a run: never
    seen = []

    def on_update(p, stats):
        seen.append(p.learner.should_stop())  # inside: the hooks' answer
        if len(seen) == 2:
            threading.Thread(target=hooks.request_stop).start()

    hooks = PodHooks(on_update=on_update)
    pod.run(Budget(seconds=30.0), hooks)
    assert hooks.stop_requested and seen[:2] == [False, False]
    assert pod.learner.should_stop() is False  # the run's hooks are gone with it
