"""The breeder on its own: it makes pods from the pool it is handed and keeps none of it."""

import pytest

from elegantpod.tournament.core.breeder import Breeder, Pool
from elegantpod.tournament.core.spec import TournamentSpec


def test_the_breeder_reads_the_pool_it_is_handed_and_registers_nothing():
    spec = TournamentSpec(env_id="Pendulum-v1", algos=("ppo",), pods=2)
    breeder, records = Breeder(spec.seed), {}
    first = breeder.new_pod(Pool(spec, records, []))
    assert first.pod_id == "p000" and first.mutation == {} and records == {}
    again = breeder.new_pod(Pool(spec, records, []))  # the pool still holds no ppo pod
    assert again.pod_id == "p001" and again.mutation == {}
    records[first.pod_id] = first
    explored = breeder.new_pod(Pool(spec, records, []))  # now it does: explore the base
    assert explored.pod_id == "p002" and explored.mutation and explored.parent is None
    assert len({first.seed, again.seed, explored.seed}) == 3


def test_a_user_pod_copies_a_live_parent_and_a_resume_never_reuses_an_id():
    spec = TournamentSpec(env_id="Pendulum-v1", algos=("ppo",), pods=1)
    breeder = Breeder(spec.seed)
    parent = breeder.new_pod(Pool(spec, {}, []))
    parent.latest_checkpoint, parent.env_steps = "pods/p000/seg-00002.pt", 4000
    pool = Pool(spec, {parent.pod_id: parent}, [])
    child = breeder.user_pod(pool, parent="p000", hparams={"lr": 1e-4})
    assert child.parent == "p000" and child.parent_checkpoint == parent.latest_checkpoint
    assert child.env_steps == 4000 and child.mutation == {"lr": [parent.hparams["lr"], 1e-4]}
    assert child.origin == {"kind": "user"}
    with pytest.raises(ValueError, match="unknown parent 'p9'"):
        breeder.user_pod(pool, parent="p9")
    breeder.resume_at(3)
    breeder.reseed({"p000", "p007"})  # a checkpoint folder of p007 survived the last save
    assert breeder.new_pod(pool).pod_id == "p008"


def test_children_and_restarts_keep_the_rules_between_hyperparameters():
    """Issue 56: a mutation that would break a rule between hyperparameters (DQN's
    ``epsilon_end`` above its ``epsilon_start``; a batch larger than the replay) leaves
    that hyperparameter as it was, rather than fail the tournament or launch a pod that
    cannot run; the rest of the mutation stands."""
    from elegantpod.agents.dqn import DQNConfig
    from elegantpod.tournament.core.protocol import PodStatus

    base = {"epsilon_start": 0.03, "buffer_size": 300, "batch_size": 256}
    spec = TournamentSpec(env_id="CartPole-v1", algos=("dqn",), pods=2, hparams={"dqn": base})
    breeder = Breeder(spec.seed)
    parent = breeder.new_pod(Pool(spec, {}, []))
    parent.latest_checkpoint, parent.recent_scores = "pods/p000/seg-00002.pt", [10.0]
    parent.status = PodStatus.RUNNING
    pool = Pool(spec, {parent.pod_id: parent}, [])
    made = []
    for _ in range(40):
        made += [breeder.new_pod(pool), breeder.fresh_pod(pool, "dqn", {"kind": "restart"})]
    assert all(r.parent == "p000" for r in made[::2]) and all(r.parent is None for r in made[1::2])
    for rec in made:
        DQNConfig(
            **{k: tuple(v) if k == "hidden" else v for k, v in rec.hparams.items()}
        ).validate()
        assert rec.hparams["epsilon_end"] <= 0.03 and rec.hparams["batch_size"] <= 300
        assert all(rec.hparams[k] == new for k, (_, new) in rec.mutation.items())
    assert any(r.mutation for r in made)  # what keeps to the rules still changes
