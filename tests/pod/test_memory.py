"""A pod's memory estimate counts what a pod holds, CUDA graphs' pool included."""

from elegantpod.agents.ppo import PPOConfig
from elegantpod.agents.sac import SACConfig
from elegantpod.config import PodSpec
from elegantpod.pod.memory import estimate_pod_bytes, may_capture


def _spec(algo="ppo", **kw) -> PodSpec:
    hp = PPOConfig(num_envs=1024, horizon=16, minibatch_size=4096) if algo == "ppo" else SACConfig()
    return PodSpec(env_id="CartPole-v1", algo=algo, hparams=hp, **kw)


def test_a_pod_that_may_replay_cuda_graphs_counts_their_memory_pool():
    """Everything a captured iteration allocates stays reserved for its replays: a second
    copy of the rollout's and the update's working memory (the review's suspicion, read
    in torch's graph pools: it was missing from the estimate)."""
    eager = estimate_pod_bytes(_spec(device="cuda", capture=False), obs_dim=4, act_dim=2)
    graphs = estimate_pod_bytes(_spec(device="cuda"), obs_dim=4, act_dim=2)
    hp = _spec().hparams
    rollout = 16 * 1024 * 4 * (2 * 4 + 2 + 3)
    whole = 8 * 16 * 1024 * max(4, *hp.hidden, 2)
    rows = 4096 * sum((4, *hp.hidden, 2))
    assert graphs - eager == rollout + whole + 2 * 8 * rows
    assert may_capture(_spec(device="auto")) and may_capture(_spec(device="cuda:1"))
    # no graphs: on a CPU, with capture off, or a learner without a static update (SAC)
    assert not may_capture(_spec(device="cpu")) and not may_capture(_spec(capture=False))
    assert not may_capture(_spec("sac", device="cuda"))
    cpu = estimate_pod_bytes(_spec(device="cpu"), obs_dim=4, act_dim=2)
    assert cpu == estimate_pod_bytes(_spec(device="cpu", capture=False), obs_dim=4, act_dim=2)
