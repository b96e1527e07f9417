import dataclasses
import json
from pathlib import Path

import pytest
import torch

from elegantpod.agents.ppo import PPOConfig
from elegantpod.agents.sac import SACConfig
from elegantpod.config import PodSpec
from elegantpod.pod.checkpoint import (
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    strip_replay_from_file,
)
from elegantpod.pod.pod import Pod


def _trained_pod(tmp_path, algo="ppo", env="CartPole-v1", **hp):
    cfg = (PPOConfig if algo == "ppo" else SACConfig)(**hp)
    spec = PodSpec(
        env_id=env, algo=algo, seed=3, hparams=cfg, max_steps=4096, eval_every_steps=4096
    )
    pod = Pod(spec, out_dir=tmp_path)
    pod.run()
    return pod


@pytest.mark.parametrize(
    ("algo", "env", "hp"),
    [
        ("ppo", "CartPole-v1", {"num_envs": 8, "horizon": 64}),
        ("ppo", "Pendulum-v1", {"num_envs": 8, "horizon": 64, "normalize_obs": True}),
        ("sac", "Pendulum-v1", {"learning_starts": 512}),
    ],
)
def test_round_trip_gives_identical_next_actions(tmp_path, algo, env, hp):
    pod = _trained_pod(tmp_path, algo, env, **hp)
    obs = torch.randn(32, pod.learner.obs_shape[0])
    pod.save()
    expected_det = pod.learner.act(obs, deterministic=True)
    expected_sto = pod.learner.explore(obs)[0]
    restored = Pod.from_checkpoint(tmp_path / "checkpoint.pt")
    assert restored.env_steps == pod.env_steps == 4096
    torch.testing.assert_close(restored.learner.act(obs, deterministic=True), expected_det)
    torch.testing.assert_close(restored.learner.explore(obs)[0], expected_sto)
    for k, o in pod.learner.optimizers.items():
        s1, s2 = o.state_dict()["state"], restored.learner.optimizers[k].state_dict()["state"]
        for key in s1:
            for name in s1[key]:
                torch.testing.assert_close(s1[key][name], s2[key][name])


def test_resumed_pod_continues_from_its_step_count(tmp_path):
    pod = _trained_pod(tmp_path, num_envs=8, horizon=64)
    spec = dataclasses.replace(pod.spec, max_steps=8192)
    resumed = Pod(spec, out_dir=tmp_path, resume=True)
    assert resumed.env_steps == 4096
    result = resumed.run()
    assert result.env_steps == 8192
    assert load_checkpoint(tmp_path / "checkpoint.pt")["env_steps"] == 8192


def test_corrupt_or_foreign_files_give_clear_errors(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"definitely not a zip archive")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(bad)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not an elegantpod checkpoint"):
        load_checkpoint(foreign)
    good = _trained_pod(tmp_path / "good", num_envs=8, horizon=64).checkpoint_path
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(Path(good).read_bytes()[:500])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(truncated)


def test_weights_only_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"format": "elegantpod-checkpoint", "version": 1, "x": Evil()}, path)
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


def test_other_architecture_is_a_clear_error(tmp_path):
    pod = _trained_pod(tmp_path, num_envs=8, horizon=64, hidden=(32, 32))
    other = Pod(dataclasses.replace(pod.spec, hparams=PPOConfig(num_envs=8, horizon=64)))
    with pytest.raises(
        CheckpointError, match=r"does not fit this ppo network \(hidden=\(64, 64\)\)"
    ):
        other.load(tmp_path / "checkpoint.pt")
    sac = Pod(PodSpec(env_id="Pendulum-v1", algo="sac"))
    with pytest.raises(CheckpointError, match="holds a 'ppo' agent for 'CartPole-v1'"):
        sac.load(tmp_path / "checkpoint.pt")


def test_atomic_save_leaves_old_file_intact_on_failure(tmp_path):
    path = tmp_path / "ck.pt"
    save_checkpoint(path, {"a": torch.ones(3)})
    before = path.read_bytes()

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        save_checkpoint(path, {"a": Unpicklable()})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]  # no temp files left behind


# -- malformed checkpoints: one clear CheckpointError naming the file and the field ----
def _spec_change(**changes):
    def change(data):
        spec = json.loads(data["spec"])
        spec.update(changes)
        data["spec"] = json.dumps(spec)

    return change


def _set(key, value):
    def change(data):
        data[key] = value

    return change


MALFORMED = {
    "no spec": (lambda d: d.pop("spec"), "has no field 'spec'"),
    "extra spec keys": (_spec_change(evil=1), r"field 'spec': unknown spec key\(s\) \['evil'\]"),
    "another algorithm's hyperparameters": (
        _spec_change(hparams=dataclasses.asdict(SACConfig())),
        r"field 'spec': hparams \[.*'buffer_size'.*\] are not ppo hyperparameters",
    ),
    "spec not a string": (
        lambda d: d.update(spec=json.loads(d["spec"])),
        "field 'spec': a spec must be JSON text, got dict",
    ),
    "spec not JSON": (_set("spec", "{not json"), "field 'spec': a spec must be JSON text"),
    "absurd hyperparameter": (
        _spec_change(hparams={"lr": 1e308}),
        r"field 'spec': lr must be <= 1.0",
    ),
    "bad RNG state": (
        lambda d: d["learner"].update(generator=torch.zeros(3, dtype=torch.uint8)),
        "field 'learner.generator' is not a random-number-generator state",
    ),
    "RNG state not a tensor": (
        lambda d: d["learner"].update(generator="seed"),
        "field 'learner.generator' is not a random-number-generator state",
    ),
    "bad env RNG state": (
        _set("env_rng", torch.zeros(3, dtype=torch.uint8)),
        "field 'env_rng' is not a random-number-generator state",
    ),
    "bad evaluation count": (_set("eval_count", -1), "field 'eval_count' must be an integer"),
    "bad step count": (_set("env_steps", "many"), "field 'env_steps' must be an integer"),
    "no learner": (lambda d: d.pop("learner"), "field 'learner' is missing"),
    "learner of junk": (_set("learner", {"modules": 3}), "describes networks of 4,610 weights"),
}


def _actor_weight(value):
    def change(data):
        weight = data["learner"]["modules"]["actor"]["0.weight"]
        data["learner"]["modules"]["actor"]["0.weight"] = value(weight)

    return change


def _adam_moment(value, moment="exp_avg"):
    """Replace an Adam moment (of more than one number) of the optimizer state."""

    def change(data):
        stack = [data["learner"]]
        while stack:
            node = stack.pop()
            for key, item in list(node.items()):
                if key == moment and torch.is_tensor(item) and item.numel() > 1:
                    node[key] = value(item)
                    return
                if isinstance(item, dict):
                    stack.append(item)
        raise AssertionError("no Adam moment in the checkpoint")

    return change


# hand-made tensors that torch.load(weights_only=True) accepts (issue 42, item 2)
HOSTILE_TENSORS = {
    "stride-0 weight": (
        _actor_weight(lambda w: torch.zeros(1).expand(w.shape)),
        r"tensor 'learner.modules.actor.0.weight' has a stride of 0",
    ),
    "a '4 GB' weight of 4 bytes": (
        _actor_weight(lambda w: torch.zeros(1).expand(2**30)),
        r"tensor 'learner.modules.actor.0.weight' has a stride of 0",
    ),
    "overlapping weight": (
        _actor_weight(lambda w: torch.zeros(67).as_strided(w.shape, (1, 1))),
        r"tensor 'learner.modules.actor.0.weight' overlaps itself",
    ),
    "stride-0 Adam moment": (
        _adam_moment(lambda m: torch.zeros(1).expand(m.shape)),
        r"exp_avg' has a stride of 0",
    ),
    "NaN weight": (
        _actor_weight(lambda w: torch.full_like(w, float("nan"))),
        r"actor.0.weight' holds NaN values",
    ),
    "complex weight": (
        _actor_weight(lambda w: torch.zeros(w.shape, dtype=torch.complex64)),
        r"actor.0.weight' has dtype torch.complex64",
    ),
    "a spec of 8 x 4096 layers": (
        _spec_change(hparams={"hidden": [4096] * 8}),
        r"its spec describes networks of 117,\d+,\d+ weights",
    ),
    "an absurd step count": (_set("env_steps", 10**400), "field 'env_steps' must be an integer"),
}
MALFORMED.update(HOSTILE_TENSORS)


# weights that Policy.load refused and a pod took (issue 56, item 2): one check for both
WEIGHTS = {
    "infinite weight": (
        _actor_weight(lambda w: torch.full_like(w, float("inf"))),
        r"tensor 'learner.modules.actor.0.weight' holds infinite values",
    ),
    "int64 weight": (
        _actor_weight(lambda w: torch.ones_like(w, dtype=torch.int64)),
        r"tensor 'learner.modules.actor.0.weight' has dtype torch.int64, the network's "
        r"torch.float32",
    ),
    "bool weight": (
        _actor_weight(lambda w: w > 0),
        r"tensor 'learner.modules.actor.0.weight' has dtype torch.bool",
    ),
    "float64 weight": (
        _actor_weight(lambda w: w.double()),
        r"tensor 'learner.modules.actor.0.weight' has dtype torch.float64",
    ),
    "missing weight": (
        lambda d: d["learner"]["modules"]["actor"].pop("0.bias"),
        r"field 'learner.modules.actor' does not fit .*: it lacks \['0.bias'\]",
    ),
    "weight of another shape": (
        _actor_weight(lambda w: torch.zeros(3, 3)),
        r"field 'learner.modules.actor' does not fit .*: tensor 'learner.modules.actor.0.weight' "
        r"has shape \(3, 3\), the network's \(64, 4\)",
    ),
}
MALFORMED.update(WEIGHTS)


def _ppo_adam(change):
    """Change the PPO optimizer's saved state (``{"state": ..., "param_groups": ...}``)."""
    return lambda data: change(data["learner"]["optimizers"]["ppo"])


def _weight_state(change):
    """Change the saved Adam state of the PPO optimizer's first weight matrix."""

    def at_matrix(saved):
        state = next(s for s in saved["state"].values() if s["exp_avg"].dim() == 2)
        change(state)

    return _ppo_adam(at_matrix)


# optimizer states that do not fit their parameters (issue 56, item 1): Adam reads and
# writes as many numbers as the parameter holds, whatever its state's shape
OPTIMIZER_STATES = {
    "Adam moment of one number": (
        _adam_moment(lambda m: torch.zeros(1)),
        r"optimizer 'ppo' state \d+ 'exp_avg' has shape \(1,\), its parameter \(\d+",
    ),
    "Adam moment of a million numbers": (
        _adam_moment(lambda m: torch.zeros(10**6)),
        r"optimizer 'ppo' state \d+ 'exp_avg' has shape \(1000000,\), its parameter",
    ),
    "float64 Adam moment": (
        _adam_moment(lambda m: m.double()),
        r"optimizer 'ppo' state \d+ 'exp_avg' has dtype torch.float64, its parameter "
        r"torch.float32",
    ),
    "transposed Adam moment": (
        _weight_state(lambda s: s.update(exp_avg=s["exp_avg"].T.contiguous().T)),
        r"optimizer 'ppo' state \d+ 'exp_avg' is not contiguous",
    ),
    "infinite Adam moment": (
        _adam_moment(lambda m: torch.full_like(m, float("inf"))),
        r"optimizer 'ppo' state \d+ 'exp_avg' holds infinite values",
    ),
    "negative second moment": (
        _adam_moment(lambda m: -torch.ones_like(m), "exp_avg_sq"),
        r"optimizer 'ppo' state \d+ 'exp_avg_sq' holds negative values",
    ),
    "missing Adam moment": (
        _weight_state(lambda s: s.pop("exp_avg_sq")),
        r"optimizer 'ppo' state \d+ holds \['exp_avg', 'step'\], where Adam keeps "
        r"\['exp_avg', 'exp_avg_sq', 'step'\]",
    ),
    "step of three numbers": (
        _weight_state(lambda s: s.update(step=torch.ones(3))),
        r"optimizer 'ppo' state \d+ 'step' must be a scalar tensor of a finite number >= 0",
    ),
    "negative step": (
        _weight_state(lambda s: s.update(step=torch.tensor(-1.0))),
        r"optimizer 'ppo' state \d+ 'step' must be .*, got tensor\(-1.\)",
    ),
    "infinite step": (
        _weight_state(lambda s: s.update(step=torch.tensor(float("inf")))),
        r"optimizer 'ppo' state \d+ 'step' must be .*, got tensor\(inf\)",
    ),
    "bool step": (
        _weight_state(lambda s: s.update(step=torch.tensor(True))),
        r"optimizer 'ppo' state \d+ 'step' must be a scalar tensor",
    ),
    "second parameter group": (
        _ppo_adam(lambda o: o["param_groups"].append(dict(o["param_groups"][0]))),
        r"optimizer 'ppo' has 2 parameter groups, this learner's 1",
    ),
    "parameter group short of a parameter": (
        _ppo_adam(lambda o: o["param_groups"][0].update(params=o["param_groups"][0]["params"][1:])),
        r"optimizer 'ppo' group 0 lists \d+ parameters, this learner's \d+",
    ),
    "parameter listed twice": (
        _ppo_adam(lambda o: o["param_groups"][0]["params"].__setitem__(1, 0)),
        r"optimizer 'ppo' group 0 must list distinct integer parameter ids",
    ),
    "state of no parameter": (
        _ppo_adam(lambda o: o["state"].__setitem__(10**6, o["state"][0])),
        r"optimizer 'ppo' state 1000000 belongs to no parameter of its groups",
    ),
    "amsgrad switched on": (
        _ppo_adam(lambda o: o["param_groups"][0].update(amsgrad=True)),
        r"optimizer 'ppo' group 0 has amsgrad=True, this learner's False",
    ),
    "optimizer state of junk": (
        lambda d: d["learner"]["optimizers"].update(ppo=[1, 2]),
        r"optimizer 'ppo' must be a dict of 'state' and 'param_groups'",
    ),
}
MALFORMED.update(OPTIMIZER_STATES)


def test_a_checkpoint_that_would_inflate_is_refused_before_loading(good_checkpoint, tmp_path):
    """A zip entry deflated from a gigabyte of zeros: refused from the archive's directory,
    before torch.load inflates anything; the CLI's export says so in one line."""
    import zipfile

    from tests.cli.test_main import run as cli

    data = torch.load(good_checkpoint, weights_only=True)
    data["learner"]["modules"]["actor"]["0.weight"] = torch.zeros(2**25)  # 128 MiB
    plain = tmp_path / "plain.pt"
    torch.save(data, plain)
    bomb = tmp_path / "bomb.pt"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    assert bomb.stat().st_size < 2**20
    with pytest.raises(CheckpointError, match="holds compressed entries"):
        Pod.from_checkpoint(bomb)
    out = cli("export", "--checkpoint", str(bomb), "--out", str(tmp_path / "p.onnx"))
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert "holds compressed entries" in out.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "p.onnx").exists()


def test_a_policy_refuses_hostile_tensors_before_building(good_checkpoint, tmp_path):
    from elegantpod.policy.policy import Policy

    for case in ("a '4 GB' weight of 4 bytes", "a spec of 8 x 4096 layers", "NaN weight"):
        change, message = HOSTILE_TENSORS[case]
        data = torch.load(good_checkpoint, weights_only=True)
        change(data)
        torch.save(data, tmp_path / "bad.pt")
        with pytest.raises(CheckpointError, match=message):
            Policy.load(tmp_path / "bad.pt")


def test_a_policy_refuses_the_weights_a_pod_refuses(good_checkpoint, tmp_path):
    """One check of the network weights for both ways in (issue 56, item 2)."""
    from elegantpod.policy.policy import Policy

    for case, (change, message) in WEIGHTS.items():
        data = torch.load(good_checkpoint, weights_only=True)
        change(data)
        path = tmp_path / f"{case.replace(' ', '-')}.pt"
        torch.save(data, path)
        with pytest.raises(CheckpointError, match=message) as info:
            Policy.load(path)
        assert str(info.value).startswith(f"checkpoint {str(path)!r}"), case


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("good")
    return _trained_pod(tmp, num_envs=8, horizon=64).checkpoint_path


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_checkpoints_are_one_clear_error(case, good_checkpoint, tmp_path):
    change, message = MALFORMED[case]
    data = torch.load(good_checkpoint, weights_only=True)
    change(data)
    path = tmp_path / "bad.pt"
    torch.save(data, path)
    where = f"checkpoint {str(path)!r}"
    with pytest.raises(CheckpointError, match=message) as info:
        Pod.from_checkpoint(path)
    assert str(info.value).startswith(where)
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", hparams=PPOConfig(num_envs=8, horizon=64)))
    before = (pod.learner.generator.get_state(), pod.env.generator.get_state())
    weights = [p.clone() for p in pod.learner.actor.parameters()]
    with pytest.raises(CheckpointError, match=message) as info:
        pod.load(path)
    assert str(info.value).startswith(where)
    assert torch.equal(pod.learner.generator.get_state(), before[0])
    assert torch.equal(pod.env.generator.get_state(), before[1])
    assert pod.env_steps == 0 and pod.evaluator.count == 0
    if case != "learner of junk":  # caught before any weight is loaded
        after = pod.learner.actor.parameters()
        assert all(torch.equal(a, b) for a, b in zip(weights, after, strict=True))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_this_machine_lacks_is_named(good_checkpoint, tmp_path):
    data = torch.load(good_checkpoint, weights_only=True)
    _spec_change(device="cuda")(data)
    path = tmp_path / "gpu.pt"
    torch.save(data, path)
    with pytest.raises(CheckpointError, match=r"field 'spec.device' is 'cuda', which this"):
        Pod.from_checkpoint(path)
    assert Pod.from_checkpoint(path, device="cpu").env_steps == 4096  # loadable here, asked
    # a pod of its own loads the weights onto its own device
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", hparams=PPOConfig(num_envs=8, horizon=64)))
    pod.load(path)
    assert pod.env_steps == 4096


def test_junk_files_and_folders_get_no_advice_to_run_their_code(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"definitely not a zip archive")
    evil = tmp_path / "evil.pt"

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save({"format": "elegantpod-checkpoint", "version": 1, "x": Evil()}, evil)
    for path in (junk, evil):
        with pytest.raises(CheckpointError, match=f"checkpoint {str(path)!r} is corrupt") as info:
            Pod.from_checkpoint(path)
        text = str(info.value)
        for advice in ("weights_only", "trusted source", "safe_globals", "Re-running"):
            assert advice not in text, text
    with pytest.raises(CheckpointError, match=r"holds a Python object \(print\)"):
        load_checkpoint(evil)
    with pytest.raises(CheckpointError, match="is a folder with no best.pt or checkpoint.pt"):
        Pod.from_checkpoint(tmp_path)  # a run folder gives its best.pt; this one has none
    with pytest.raises(CheckpointError, match="is a folder, not a file"):
        load_checkpoint(tmp_path)


# -- replay buffers only where needed ---------------------------------------------------
def _sac_spec(**changes) -> PodSpec:
    hp = SACConfig(num_envs=4, horizon=16, learning_starts=2048, batch_size=64, hidden=(16, 16))
    spec = PodSpec(env_id="Pendulum-v1", algo="sac", hparams=hp, max_steps=2560, eval_episodes=2)
    return dataclasses.replace(spec, **changes)


def test_strip_replay_shrinks_a_checkpoint_that_still_loads_and_trains(tmp_path):
    pod = Pod(_sac_spec(), out_dir=tmp_path)
    pod.run()
    assert pod.learner.gradient_steps > 0 and len(pod.learner.replay) == 2560
    path = pod.checkpoint_path
    size = path.stat().st_size
    assert strip_replay_from_file(path) is True
    stripped = path.stat().st_size
    assert size - stripped >= 2560 * 4 * (3 + 3 + 1 + 1)  # obs, next obs, action, reward
    assert stripped < size / 2
    assert "replay" not in load_checkpoint(path)["learner"]
    assert strip_replay_from_file(path) is False  # nothing left to strip: the file is untouched
    # no temp files; best.pt (the best evaluation's agent) never carries the replay
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.pt", "checkpoint.pt"]
    assert "replay" not in load_checkpoint(tmp_path / "best.pt")["learner"]

    resumed = Pod(_sac_spec(max_steps=4096), out_dir=tmp_path, resume=True)
    obs = torch.randn(8, 3)
    torch.testing.assert_close(resumed.learner.act(obs), pod.learner.act(obs))
    assert len(resumed.learner.replay) == 0 and resumed.learner.seen == pod.learner.seen
    child = Pod(
        _sac_spec(seed=9, max_steps=3072)
    )  # a child copying its parent, as a tournament does
    child.load(path, restore_rng=False)
    torch.testing.assert_close(child.learner.act(obs), pod.learner.act(obs))
    assert len(child.learner.replay) == 0

    steps = resumed.learner.gradient_steps
    resumed.run()
    # refills min(learning_starts, 4 * batch_size) = 256 transitions, then learns on
    assert resumed.learner.gradient_steps > steps and len(resumed.learner.replay) == 1536
    assert child.run().env_steps == 3072 and child.learner.gradient_steps > steps


def test_strip_replay_of_fused_learners_and_at_a_url(tmp_path):
    pod = Pod(_sac_spec(learners=2, max_steps=512))
    url = "memory://elegantpod-test/fused.pt"
    pod.save(url)
    assert strip_replay_from_file(url) is True
    data = load_checkpoint(url)
    assert "replay" not in data["learner"] and "replay" not in data["learner"]["fused"][0]
    again = Pod(_sac_spec(learners=2))
    again.load(url)
    assert [len(x.replay) for x in again.learner.learners] == [0, 0]
    ppo = Pod(PodSpec(env_id="CartPole-v1", algo="ppo"), out_dir=tmp_path)
    assert strip_replay_from_file(ppo.save()) is False  # an on-policy learner keeps no replay


def test_a_fused_adam_moment_that_does_not_fit_is_refused_before_loading(tmp_path):
    """Fused Adam (SAC's, on a CPU too) reads and writes as many numbers as each parameter
    holds, wherever its moment ends: a 1-number moment made it write past its buffer, a
    10**6-number one trained with no error (issue 56, item 1). No step is taken here."""
    hp = dataclasses.replace(_sac_spec().hparams, learning_starts=64)
    pod = Pod(_sac_spec(max_steps=128, hparams=hp), out_dir=tmp_path)
    pod.run()
    adam = pod.learner.optimizers["actor"]
    assert adam.param_groups[0]["fused"] and pod.learner.gradient_steps > 0
    mine = {k: v.clone() for k, v in adam.state[adam.param_groups[0]["params"][0]].items()}
    for moment, shape in ((torch.zeros(1), r"\(1,\)"), (torch.zeros(10**6), r"\(1000000,\)")):
        data = torch.load(pod.checkpoint_path, weights_only=True)
        data["learner"]["optimizers"]["actor"]["state"][0]["exp_avg"] = moment
        path = tmp_path / "bad.pt"
        torch.save(data, path)
        message = rf"optimizer 'actor' state 0 'exp_avg' has shape {shape}, its parameter \(16, 3\)"
        with pytest.raises(CheckpointError, match=message):
            Pod.from_checkpoint(path)
        with pytest.raises(CheckpointError, match=message):
            pod.load(path)
    after = adam.state[adam.param_groups[0]["params"][0]]
    assert all(torch.equal(after[k], v) for k, v in mine.items())
