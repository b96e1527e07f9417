"""A checkpoint is parsed and checked once (issue 33), and a rerun segment loads the
value it inspected instead of reading the file again."""

import pytest

from elegantpod import Pod, PodSpec
from elegantpod.pod.checkpoint import CheckpointError, checkpoint_bytes
from elegantpod.pod.saved import SavedPod


def _saved(tmp_path, **changes):
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=2))
    payload = {**pod.checkpoint_payload(), **changes}
    path = tmp_path / "c.pt"
    path.write_bytes(checkpoint_bytes(payload))
    return pod, path


def test_fields_are_parsed_once_and_a_value_loads(tmp_path):
    pod, path = _saved(tmp_path, best_score=12.5, env_steps=4096)
    saved = SavedPod.read(path)
    assert saved.env_steps == 4096 and saved.best_score == 12.5 and saved.eval_count == 0
    assert saved.spec.env_id == "CartPole-v1" and saved.origin() is None
    twin = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=2))
    twin.load(saved)
    assert twin.env_steps == 4096 and twin.best_score == 12.5


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("env_steps", -1, "field 'env_steps' must be an integer >= 0"),
        ("env_steps", True, "field 'env_steps' must be an integer >= 0"),
        ("learner", [1], "field 'learner' is missing or not a dict"),
        ("best_score", float("nan"), "field 'best_score' must be a finite number"),
        ("eval_count", -3, "field 'eval_count' must be an integer >= 0"),
        ("origin", {"tournament": "x"}, "field 'origin' must be"),
    ],
)
def test_a_malformed_field_is_named(tmp_path, field, value, named):
    _, path = _saved(tmp_path, **{field: value})
    with pytest.raises(CheckpointError, match=named):
        saved = SavedPod.read(path)
        saved.origin()  # the origin is checked when asked for
