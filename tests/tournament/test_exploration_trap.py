"""The exploration trap, CI-sized: a tournament reaches what lone pods mostly miss.

MountainCarContinuous-v0 with TD3: the action cost teaches a policy to stand still
(return ~0) long before noise carries the car to the flag (+100). Four pods with the
same starting hyperparameters train side by side, once as four lone pods (never
replaced) and once as a tournament. Everything is counted in env steps and each pod is
seeded by its index, so both runs see the same four pods: the lone pods' outcome is fixed
by their seeds, and the tournament is judged against exactly those pods.
"""

import pytest

from elegantpod import Tournament
from elegantpod.tournament import GeneratorConfig

ENV, TARGET = "MountainCarContinuous-v0", 90.0
TRAP = {"num_envs": 16, "replay_ratio": 0.25, "exploration_noise": 1.0}
PER_POD = 48_000  # env steps each pod gets


def run(client, store, generator, target):
    t = Tournament(
        ENV,
        algos=["td3"],
        pods=4,
        hparams={"td3": TRAP},
        segment_steps=8_000,
        max_steps=4 * PER_POD,
        target_reward=target,
        eval_episodes=5,
        generator=generator,
        store=store,
        client=client,
        seed=0,
    )
    for _ in range(4):  # identical hyperparameters; pods are seeded by index
        t.add_pod("td3", **TRAP)
    t.start()
    t.wait(300)
    assert t.status == "finished", t.summary()
    return t


@pytest.mark.slow
def test_a_tournament_escapes_the_trap_that_holds_most_lone_pods(client, tmp_path):
    t = run(client, tmp_path / "tournament", GeneratorConfig(), TARGET)
    assert t.summary()["best_score"] >= TARGET
    # The lone pods: the same four, trained to the same per-pod budget, never replaced.
    alone = run(client, tmp_path / "alone", GeneratorConfig(ready_segments=10**9), None)
    best = alone.history().groupby("pod")["score"].max()
    assert len(best) == 4 and (best >= TARGET).sum() < 2, best.to_dict()
    # Before a pod found the flag every score was ~0 and no pod was replaced (min_gap):
    # the plain rule would have replaced the pods still exploring with copies of the
    # one that stopped moving first. After, the trapped pods made way for its children.
    hist = t.history()
    first = hist[hist["score"] >= TARGET]["time"].min()
    assert t.summary()["pods_total"] >= 4
    assert any(ph["changes"] for ph in t.schedule()) or t.summary()["pods_replaced"] >= 1, (
        t.lineage(),
        first,
    )
