"""Your own gymnasium env in a tournament (elegantpod.envs.user_gym): registered in a
script's ``main()``, passed as a class, or registered by an ``--import``-ed module, it
reaches the workers, which never had it (issue 42, item 5).

The scripts run as a user runs them, in a fresh process with its own LocalCluster of
spawned worker processes: what those workers know is only what was shipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import gymnasium
import pytest

from elegantpod.envs.registry import register_env
from elegantpod.envs.user_gym import as_env_id, shipped_registration

REACH = textwrap.dedent(
    """
    import gymnasium
    import numpy as np


    class Reach1D(gymnasium.Env):
        '''Walk to the goal at +5 on a line: reward 1 there, -0.01 a step elsewhere.'''

        observation_space = gymnasium.spaces.Box(-10, 10, (1,), np.float32)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.x = 0.0
            return np.array([self.x], np.float32), {}

        def step(self, action):
            self.x += 1.0 if action == 1 else -1.0
            done = abs(self.x) >= 5
            reward = 1.0 if self.x >= 5 else -0.01
            return np.array([self.x], np.float32), reward, done, False, {}
    """
)

SCRIPT = REACH + textwrap.dedent(
    """
    import json, sys
    import elegantpod


    def make_reach():
        return Reach1D()


    def main():
        gymnasium.register("Reach1D-v0", entry_point=Reach1D, max_episode_steps=20)
        client = elegantpod.cluster(n_workers=2, dashboard_address=None)
        out = {}
        for name, env in (("id", "Reach1D-v0"), ("factory", make_reach)):
            t = elegantpod.Tournament(
                env, algos=["ppo"], pods=2, store=sys.argv[1] + "/" + name, client=client,
                max_steps=2_048, segment_steps=1_024,
                hparams={"ppo": {"num_envs": 8, "horizon": 64}},
            )
            s = t.start().wait()
            out[name] = [s["status"], s["pods_failed"], s["env_steps_total"], t.spec.env_id]
        elegantpod.shutdown(client)
        print(json.dumps(out))


    if __name__ == "__main__":
        main()
    """
)


def _run(args, cwd, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_an_env_registered_in_main_or_passed_as_a_factory_trains_on_the_workers(tmp_path):
    script = tmp_path / "reach.py"
    script.write_text(SCRIPT)
    proc = _run([sys.executable, str(script), str(tmp_path)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["id"][:2] == ["finished", 0] and out["id"][2] >= 2_048, out
    assert out["factory"][:2] == ["finished", 0] and out["factory"][3] == "make_reach-v0", out


@pytest.mark.slow
def test_the_cli_ships_an_env_that_an_imported_module_registers(tmp_path):
    """``elegantpod tournament --import my_env --env Reach1D-v0``: the module is in the
    working folder, which the workers do not import from."""
    (tmp_path / "my_env.py").write_text(
        REACH + '\ngymnasium.register("Reach1D-v0", entry_point=Reach1D, max_episode_steps=20)\n'
    )
    args = [
        sys.executable, "-m", "elegantpod.cli", "tournament", "--import", "my_env",
        "--env", "Reach1D-v0", "--pods", "2", "--workers", "1", "--max-steps", "2048",
        "--segment-steps", "1024", "--store", str(tmp_path / "s"), "--json", "--quiet",
        "--set", "ppo.num_envs=8", "--set", "ppo.horizon=64",
    ]  # fmt: skip
    proc = _run(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["status"] == "finished" and summary["pods_failed"] == 0, summary


class Line(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1, 1, (1,))
    action_space = gymnasium.spaces.Discrete(2)


def test_a_class_or_factory_becomes_an_id_and_a_taken_id_is_refused():
    assert as_env_id("CartPole-v1") == "CartPole-v1"
    assert as_env_id(Line) == "Line-v0" == as_env_id(Line)  # the same class: the same id
    registration = shipped_registration("Line-v0")
    assert registration["entry_point"] is Line and registration["id"] == "Line-v0"
    assert shipped_registration("CartPole-v1") is None  # gymnasium's own: never shipped

    class Other(gymnasium.Env):
        pass

    Other.__name__ = "Line"
    with pytest.raises(ValueError, match="'Line-v0' is registered with gymnasium for another"):
        as_env_id(Other)
    with pytest.raises(ValueError, match="an env id, an env class or a factory"):
        as_env_id(42)


def test_register_env_with_a_gymnasium_env_says_what_to_do():
    with pytest.raises(ValueError, match=r"Line is a gymnasium.Env: register it with "):
        register_env("Line-v1", Line)
