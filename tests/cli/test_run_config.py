"""``--config`` and ``--preset`` (issue 34, item 5): runs from a file, errors that name
the key and its line, spec.json / tournament.json passed back, the shipped presets.

All in this process through ``elegantpod.cli.main.main`` (or the functions it calls), with
no cluster: every error here comes before any cluster work, and the one train run is a
few hundred env steps.
"""

import dataclasses
import json
import sys

import pytest

TRAIN = ["train", "--quiet"]


def main_in_process(args, capsys, monkeypatch):
    """``elegantpod ARGS`` through ``main()`` in this process: (status, stdout, stderr)."""
    from elegantpod.cli.main import main

    monkeypatch.setattr(sys, "path", list(sys.path))  # main() drops the working folder
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def parsed(argv):
    """``argv`` parsed and completed from its files, as ``main()`` does."""
    from elegantpod.cli.args import check_args, parser
    from elegantpod.cli.run_config import apply_run_files

    args = parser().parse_args([str(a) for a in argv])
    args.run_config = apply_run_files(args, [str(a) for a in argv])
    check_args(args)
    return args


def one_error(status, err):
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("elegantpod: error:"), err
    return lines[0][len("elegantpod: error: ") :]


# -- round trips -------------------------------------------------------------------------
def test_a_train_runs_spec_json_repeats_the_run(tmp_path, capsys, monkeypatch):
    """A spec.json as ``train --out`` writes it (the pod's spec, device decided), passed
    back as --config, trains the same spec again: the one train run of this file."""
    from elegantpod.config import PodSpec
    from elegantpod.training import build_spec

    spec = build_spec(
        "CartPole-v1", "ppo", seed=3, max_steps=128, device="cpu", eval_episodes=2,
        hparams={"num_envs": 4, "horizon": 16, "minibatch_size": 32, "lr": 1e-3,
                 "hidden": (16, 16)},
        eval_every_steps=64, env_kwargs={"max_episode_steps": 100},
    )  # fmt: skip
    first = tmp_path / "first.json"
    first.write_text(spec.to_json())
    args = [*TRAIN, "--config", first, "--out", tmp_path / "again", "--json"]
    status, out, err = main_in_process(args, capsys, monkeypatch)
    assert status == 0, err
    again = json.loads((tmp_path / "again" / "spec.json").read_text())
    assert again == json.loads(first.read_text())
    assert PodSpec.from_dict(again) == spec
    assert json.loads(out.splitlines()[-1])["env_steps"] == 128


def test_a_stores_tournament_json_repeats_the_tournament(tmp_path):
    from elegantpod.cli.commands import tournament_options
    from elegantpod.tournament.core.spec import make_spec, spec_names

    spec = make_spec(
        env_id="Pendulum-v1", algos=("ppo", "sac"), pods=4, max_seconds=30.0, seed=7,
        segment_steps=2048, leaderboard_size=5, max_retries=2, failed_replacements=3,
        hparams={"ppo": {"lr": 1e-3, "hidden": (32, 32)}, "sac": {"tau": 0.02}},
        generator={"truncation": 0.5}, env_kwargs={"max_episode_steps": 100},
        eval_episodes=3, device="cpu",
    )  # fmt: skip
    saved = tmp_path / "tournament.json"
    saved.write_text(spec.to_json())  # what a store holds
    args = parsed(["tournament", "--config", saved, "--store", tmp_path / "new"])
    assert make_spec(**spec_names(tournament_options(args))) == spec
    # the flags still override it
    args = parsed(["tournament", "--config", saved, "--store", tmp_path / "new", "--pods", "6"])
    again = make_spec(**spec_names(tournament_options(args)))
    assert again == dataclasses.replace(spec, pods=6)


# -- layers ----------------------------------------------------------------------------
def test_preset_then_config_then_flags(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text(
        "env: Hopper-v5\nseed: 4\nmax-steps: 5000\n"
        "hparams:\n  sac: {lr: 1.0e-3}\n"
        "train:\n  max_steps: 6000\n"
    )
    args = parsed(["train", "--preset", "mujoco", "--config", run, "--seed", "9"])
    assert (args.env, args.algo, args.seed, args.max_steps) == ("Hopper-v5", "sac", 9, 6000)
    hp = args.run_config.train_hparams("sac")
    assert hp == {"hidden": [256, 256], "lr": 1e-3, "learning_starts": 10_000, "replay_ratio": 0.5}
    assert args.run_config.train_hparams("ppo") == {}  # the preset has no ppo section
    # a null puts the preset's value back to the default; flags beat both
    run.write_text("env: null\n")
    args = parsed(["train", "--preset", "mujoco", "--config", run, "--env", "Walker2d-v5"])
    assert args.env == "Walker2d-v5"
    with pytest.raises(ValueError, match="--env is required"):  # the preset's is gone
        parsed(["train", "--preset", "trading", "--config", run])
    run.write_text("algo: null\n")
    args = parsed(["train", "--preset", "trading", "--config", run, "--algo", "sac"])
    assert args.env == "StockTrading-v0" and args.algo == "sac" and args.fitness == "sharpe"


def test_a_tournament_takes_the_sections_of_its_algorithms(tmp_path):
    from elegantpod.cli.commands import tournament_options

    args = parsed(["tournament", "--preset", "mujoco", "--store", tmp_path, "--algos", "td3",
                   "--set", "td3.lr=3e-4", "--max-seconds", "9"])  # fmt: skip
    given = tournament_options(args)
    assert given["algos"] == "td3" and given["max_seconds"] == 9.0
    assert given["hparams"] == {
        "td3": {"hidden": [256, 256], "learning_starts": 10000, "replay_ratio": 0.5,
                "lr": "3e-4"}
    }  # fmt: skip


def test_search_space_is_passed_through_to_the_tournament(tmp_path):
    from elegantpod.cli.commands import tournament_options

    run = tmp_path / "run.json"
    space = {"ppo": {"lr": {"loguniform": [1e-4, 1e-2]}}}
    run.write_text(json.dumps({"env": "CartPole-v1", "max_seconds": 5, "search_space": space}))
    given = tournament_options(parsed(["tournament", "--config", run, "--store", tmp_path]))
    assert given["search_space"] == space
    flag = tmp_path / "space.json"  # --search-space FILE, given, replaces the file's
    flag.write_text(json.dumps({"ppo": {"epochs": {"choice": [2, 4]}}}))
    args = parsed(["tournament", "--config", run, "--store", tmp_path, "--search-space", flag])
    assert tournament_options(args)["search_space"] == json.loads(flag.read_text())


def test_a_tournament_accepts_the_search_space_of_a_file(tmp_path):
    import inspect

    from elegantpod.tournament.core.spec import TournamentSpec
    from elegantpod.tournament.orchestrator import Tournament

    takes = {f.name for f in dataclasses.fields(TournamentSpec)}
    takes |= set(inspect.signature(Tournament.__init__).parameters)
    if "search_space" not in takes:
        pytest.skip("Tournament(search_space=...) is not in this tree yet (branch i34-space)")
    from elegantpod.cli.commands import tournament_options

    run = tmp_path / "run.yaml"
    run.write_text(
        "env: CartPole-v1\nmax_seconds: 5\nsearch_space:\n"
        "  ppo: {lr: {loguniform: [1.0e-4, 1.0e-2]}}\n"
    )
    given = tournament_options(parsed(["tournament", "--config", run, "--store", tmp_path / "s"]))
    t = Tournament(given.pop("env"), store=str(tmp_path / "s"), **given)
    assert t.spec.env_id == "CartPole-v1" and set(t.spec.search_space) == {"ppo"}
    # and a store's tournament.json holding it repeats it
    saved = tmp_path / "tournament.json"
    saved.write_text(t.spec.to_json())  # what the store will hold
    again = parsed(["tournament", "--config", saved, "--store", tmp_path / "s2"])
    assert (
        tournament_options(again)["search_space"] == json.loads(saved.read_text())["search_space"]
    )


# -- presets ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mujoco", "mjx", "box2d", "trading"])
def test_each_preset_loads_and_validates(name, tmp_path):
    from elegantpod.cli.commands import tournament_options
    from elegantpod.tournament.core.spec import make_spec, spec_names

    args = parsed(["train", "--preset", name])
    args.run_config.check_hparams(args.algo, args.run_config.train_hparams(args.algo))
    assert args.env and args.algo
    args = parsed(["tournament", "--preset", name, "--store", tmp_path, "--max-seconds", "5"])
    spec = make_spec(**spec_names(tournament_options(args)))  # every check but a cluster's
    assert spec.env_id == args.env


def test_presets_are_listed_and_an_unknown_one_names_them(capsys, monkeypatch):
    from pathlib import Path

    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["package-data"]["elegantpod.cli.presets"] == ["*.yaml"]
    status, out, _ = main_in_process(["presets"], capsys, monkeypatch)
    assert status == 0 and [ln.split()[0] for ln in out.splitlines()] == [
        "box2d", "mjx", "mujoco", "trading"
    ]  # fmt: skip
    status, listed, _ = main_in_process(["train", "--preset", "list"], capsys, monkeypatch)
    assert status == 0 and listed == out
    status, _, err = main_in_process([*TRAIN, "--preset", "../x"], capsys, monkeypatch)
    assert one_error(status, err) == "unknown preset '../x'; presets: box2d, mjx, mujoco, trading"


# -- errors name the file, the line and the key ------------------------------------------
BAD_FILES = [
    (
        "run.yaml",
        "env: CartPole-v1\nalgo: ppo\n# a comment\nmax_step: 10\n",
        "run.yaml:4: unknown key 'max_step' (did you mean 'max_steps'?)",
    ),
    (
        "run.yaml",
        "env: CartPole-v1\nseed: abc\nalgo: ppo\n",
        "run.yaml:2: seed must be an integer, got 'abc'",
    ),
    (
        "run.yaml",
        "env: CartPole-v1\nalgo: ppo\nmax_steps: -5\n",
        "run.yaml:3: max_steps must be > 0",
    ),
    (
        "run.yaml",
        "env: CartPole-v1\nalgo: ppo\nhparams:\n  lr: 1.0e-3\n  epochs: many\n",
        "run.yaml:5: epochs must be an integer, got 'many'",
    ),
    ("run.yaml", "env: CartPol\nalgo: ppo\n", "run.yaml:1: unknown env id 'CartPol'"),
    ("run.yaml", "env: CartPole-v1\nalgo: xyz\n", "run.yaml:2: unknown algorithm 'xyz'"),
    (
        "run.yaml",
        "env: CartPole-v1\nalgo: ppo\npods: 4\n",
        "run.yaml:3: 'pods' is a tournament option; a file that serves both commands keeps "
        "it under 'tournament:'",
    ),
    (
        "run.yaml",
        "env: CartPole-v1\nalgo: ppo\nquiet: yes please\n",
        "run.yaml:3: quiet must be true or false",
    ),
    (
        "run.yaml",
        "env: CartPole-v1\noverwrite: true\n",
        "run.yaml:2: 'overwrite' is refused in a run file (it deletes an earlier run): give "
        "--overwrite on the command line",
    ),
    ("run.yaml", "import: evil\n", "run.yaml:1: 'import' is refused in a run file"),
    (
        "run.yaml",
        "env: CartPole-v1\nseed: 1\nseed: 2\n",
        "run.yaml:3: key 'seed' given twice (first at line 2)",
    ),
    (
        "run.yaml",
        "env: CartPole-v1\nalgo: ppo\nhparams:\n  ppo: {lr: 0.1}\n  gamma: 0.9\n",
        "run.yaml:5: hparams mixes per-algorithm sections",
    ),
    (
        "run.json",
        '{\n  "env": "CartPole-v1",\n  "algo": "ppo",\n  "hparams": {\n    "lr": 5.0\n  }\n}\n',
        "run.json:5: lr must be <= 1.0 (a hard limit), got 5.0",
    ),
    (
        "run.json",
        '{"env": "CartPole-v1",\n "algo": "ppo",\n "max_steps": "many"}',
        "run.json:3: max_steps must be an integer, got 'many'",
    ),
    (
        "run.json",
        '{"env": "CartPole-v1",\n "seed": 1,\n "seed": 2}',
        "run.json:3: key 'seed' given twice (first at line 2)",
    ),
    (
        "run.json",
        '{"env": "CartPole-v1",\n "algo": "ppo",\n "hparams": {"lr_x": 1}}',
        "run.json:3: unknown hyperparameter 'lr_x' for PPOConfig",
    ),
    (
        "run.json",
        '{"env": "CartPole-v1",\n "algo": "ppo",\n  "seed": 1,\n}',
        "run.json:4: not JSON: Expecting property name enclosed in double quotes",
    ),
    ("run.yaml", "env: [CartPole-v1\n", "run.yaml:2: "),
    (
        "spec.json",
        '{"env_id": "CartPole-v1", "algos": ["ppo"], "pods": 2}',
        "spec.json: this is a tournament.json: pass it to elegantpod tournament --config",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_FILES)
def test_a_bad_run_file_is_one_error_naming_its_line(
    name, text, message, tmp_path, capsys, monkeypatch
):
    run = tmp_path / name
    run.write_text(text)
    args = [*TRAIN, "--config", run, "--out", tmp_path / "out"]
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert one_error(status, err).startswith(str(tmp_path / message)), err
    assert not (tmp_path / "out").exists()


def test_a_tournament_file_error_names_the_line_of_its_algorithm(tmp_path, capsys, monkeypatch):
    run = tmp_path / "t.yaml"
    run.write_text(
        "env: Pendulum-v1\nalgos: [ppo, sac]\nmax_seconds: 5\n"
        "hparams:\n  sac: {lr: 3.0e-4}\n  ppo: {lr: 2}\n"
    )
    args = ["tournament", "--config", run, "--store", tmp_path / "s"]
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert one_error(status, err) == f"{run}:6: lr must be <= 1.0 (a hard limit), got 2.0"
    run.write_text("env: Pendulum-v1\nmax_seconds: 5\nhparams: {lr: 0.1}\n")
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert "t.yaml:3: a tournament's hparams are per algorithm" in one_error(status, err)
    run.write_text("env: Pendulum-v1\nmax_seconds: 5\nhparams:\n  ppo2: {lr: 0.1}\n")
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert one_error(status, err).startswith(f"{run}:4: unknown algorithm 'ppo2'")
    # a value given as a flag is the flag's error, with no line of the file
    run.write_text("env: Pendulum-v1\nmax_seconds: 5\n")
    status, _, err = main_in_process([*args, "--pods", "0"], capsys, monkeypatch)
    assert one_error(status, err) == "pods must be > 0, got 0"
    assert not (tmp_path / "s").exists()


# -- a file is untrusted input -----------------------------------------------------------
HOSTILE = [
    (
        "tag.yaml",
        "env: !!python/object/apply:os.system ['echo hacked']\n",
        "tag.yaml:1: could not determine a constructor for the tag",
    ),
    (
        "name.yaml",
        "env: !!python/name:os.system\n",
        "name.yaml:1: could not determine a constructor for the tag",
    ),
    ("list.yaml", "- env\n- CartPole-v1\n", "list.yaml:1: a run file is a mapping of options"),
    (
        "scalar.json",
        "17",
        "scalar.json:1: a run file is a mapping of options (key: value), got a number",
    ),
    (
        "empty.yaml",
        "",
        "empty.yaml:1: a run file is a mapping of options (key: value), got nothing",
    ),
    (
        "bomb.yaml",
        'a: &a ["x", "x"]\nb: &b [*a, *a]\nc: [*b, *b]\n',
        "bomb.yaml:1: anchors and aliases (&name, *name) are not accepted",
    ),
    ("deep.yaml", "env: " + "[" * 200 + "]" * 200 + "\n", "deep.yaml:1: nested too deeply"),
    ("deep.json", '{"env": ' + "[" * 5000 + "]" * 5000 + "}", "deep.json: nested too deeply"),
    ("digits.yaml", "seed: " + "9" * 5000 + "\n", "digits.yaml: "),
    ("set.yaml", "env: !!set {a, b}\n", "set.yaml: set values are not accepted"),
    ("nan.json", '{"target_reward": NaN}', "nan.json: NaN is not a JSON number"),
    (
        "twice.yaml",
        "env: CartPole-v1\nmax_steps: 5000\nmax-steps: 9000\n",
        "twice.yaml:3: 'max-steps' sets 'max_steps' again (as 'max_steps' did)",
    ),
    ("nul.yaml", "env: CartPole-v1\nseed: 1\x00\n", "nul.yaml:2: a NUL byte"),
    (
        "base60.yaml",
        "env: CartPole-v1\nmax_steps: 190:20:30\n",
        "base60.yaml:2: '190:20:30' is a base-60 number to YAML",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), HOSTILE)
def test_a_hostile_run_file_is_refused(name, text, message, tmp_path, capsys, monkeypatch):
    run = tmp_path / name
    run.write_text(text)
    status, _, err = main_in_process([*TRAIN, "--config", run], capsys, monkeypatch)
    assert one_error(status, err).startswith(str(tmp_path / message)), err


def test_a_huge_or_odd_file_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    import os

    from elegantpod.cli.run_file import MAX_BYTES

    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"# " + b"x" * MAX_BYTES + b"\n")
    status, _, err = main_in_process([*TRAIN, "--config", huge], capsys, monkeypatch)
    assert "over the limit of 1048576 bytes" in one_error(status, err)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # open() of a FIFO would block for ever
    status, _, err = main_in_process([*TRAIN, "--config", fifo], capsys, monkeypatch)
    assert "is a FIFO" in one_error(status, err) or "FIFO" in err, err
    status, _, err = main_in_process([*TRAIN, "--config", tmp_path], capsys, monkeypatch)
    assert one_error(status, err) == f"--config {str(tmp_path)!r} is a folder, not a file"
    (tmp_path / "latin1.yaml").write_bytes(b"env: caf\xe9\n")
    args = [*TRAIN, "--config", tmp_path / "latin1.yaml"]
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert "latin1.yaml: not UTF-8 text" in one_error(status, err)
    status, _, err = main_in_process([*TRAIN, "--config", tmp_path / "no"], capsys, monkeypatch)
    assert one_error(status, err) == f"--config {str(tmp_path / 'no')!r}: no such file"


def test_a_date_in_yaml_is_its_text_and_env_kwargs_merge_under_the_flags(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text(
        "env: StockTrading-v0\nalgo: ppo\nenv_arg:\n  start: 2001-01-02\n  data: sp500\n"
        "eval_env_kwargs: [episode_days=null]\n"
    )
    args = parsed(["train", "--config", run, "--env-arg", "start=2003-01-01"])
    files = args.run_config
    assert files.env_kwargs == {"start": "2001-01-02", "data": "sp500"}
    assert files.eval_env_kwargs == {"episode_days": None}
    assert ("env_kwargs", "data") in files.where and ("env_kwargs", "start") not in files.where


def test_each_key_keeps_the_line_of_the_layer_that_set_it(tmp_path, capsys, monkeypatch):
    """The preset's sac.hidden and the file's plain lr: an error about either names its
    own file; the file's plain lr beats the preset's sac section."""
    run = tmp_path / "run.yaml"
    run.write_text("env: Hopper-v5\nhparams:\n  lr: 2.0\n")
    args = parsed(["train", "--preset", "mujoco", "--config", run])
    assert args.run_config.train_hparams("sac")["lr"] == 2.0
    status, _, err = main_in_process([*TRAIN, "--preset", "mujoco", "--config", run], capsys,
                                     monkeypatch)  # fmt: skip
    assert one_error(status, err) == f"{run}:3: lr must be <= 1.0 (a hard limit), got 2.0"
    run.write_text("env: Hopper-v5\nhparams:\n  sac: {lr: 0.1}\n")
    status, _, err = main_in_process(
        [*TRAIN, "--preset", "mujoco", "--config", run, "--set", "learning_starts=-1"],
        capsys, monkeypatch,
    )  # fmt: skip
    assert not one_error(status, err).startswith(("preset", str(run))), err
    files = parsed(["train", "--preset", "mujoco", "--config", run]).run_config
    assert files.where[("hparams", "sac", "hidden")][0].name == "preset mujoco"
    assert files.where[("hparams", "sac", "lr")][0].name == str(run)


# -- nothing in a file reaches the network -----------------------------------------------
@pytest.fixture
def listener():
    """A TCP port on loopback that counts the connections made to it (none, we hope)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(5)
    server.close()
    for conn in accepted:
        conn.close()


REACHING = [
    (
        ["tournament"],
        "address: tcp://127.0.0.1:{port}\n",
        "t.yaml:4: 'address' is refused in a run file (connecting to a Dask scheduler lets "
        "it run code in this process): give --address on the command line",
    ),
    (
        ["tournament"],
        "tournament:\n  address: 127.0.0.1:{port}\n",
        "t.yaml:5: 'address' is refused in a run file",
    ),
    (
        ["tournament"],
        "env_kwargs:\n  data: http://127.0.0.1:{port}/prices.csv\n",
        "t.yaml:5: env_kwargs.data is a URL ('http://127.0.0.1:{port}/prices.csv'), and "
        "nothing in a run file reaches the network: give --env-arg data=",
    ),
    (
        ["tournament"],
        "eval_env_kwargs: {{data: 'simplecache::http://127.0.0.1:{port}/p.csv'}}\n",
        "t.yaml:4: eval_env_kwargs.data is a URL",
    ),
    (
        ["tournament"],
        "track: tensorboard\ntrack_to: http://127.0.0.1:{port}/\n",
        "t.yaml:5: track_to is a URL ('http://127.0.0.1:{port}/'), and nothing in a run file "
        "reaches the network: give --track-to on the command line yourself",
    ),
    (
        ["tournament", "--store", "{tmp}/s"],
        "store: s3://bucket/run\n",
        None,  # the flag gave the store: the file's is never used
    ),
    (
        ["tournament"],
        "store: s3://bucket/run\n",
        "t.yaml:4: store is a URL ('s3://bucket/run'), and nothing in a run file reaches the "
        "network: give --store on the command line yourself",
    ),
]


@pytest.mark.parametrize(("argv", "text", "message"), REACHING)
def test_a_run_file_cannot_make_the_cli_connect_anywhere(
    argv, text, message, listener, tmp_path, capsys, monkeypatch
):
    """A file's scheduler address, or a URL as any value, is refused before any socket
    opens (a scheduler can run code in the process that connects to it), unless the
    command line gives that option too."""
    port, accepted = listener
    run = tmp_path / "t.yaml"
    run.write_text("env: Pendulum-v1\nmax_seconds: 5\nmax_steps: 1000\n" + text.format(port=port))
    argv = [a.format(tmp=tmp_path) for a in argv]
    if "--store" not in argv:
        argv += ["--store", tmp_path / "s"] if "store:" not in text else []
    if message is None:
        args = parsed([*argv, "--config", run])
        assert args.store == str(tmp_path / "s")
        return
    status, _, err = main_in_process([*argv, "--config", run], capsys, monkeypatch)
    assert one_error(status, err).startswith(f"{run}:" + message.format(port=port)[7:]), err
    assert not accepted
    assert not (tmp_path / "s").exists()


def test_a_file_may_repeat_what_the_command_line_gives(tmp_path, listener):
    port, accepted = listener
    run = tmp_path / "t.yaml"
    run.write_text(
        f"env: StockTrading-v0\naddress: tcp://127.0.0.1:{port}\n"
        f"env_kwargs:\n  data: http://127.0.0.1:{port}/p.csv\ntrack_to: sqlite:///m.db\n"
    )
    args = parsed(
        [
            "tournament",
            "--config",
            run,
            "--store",
            tmp_path / "s",
            "--address",
            f"tcp://127.0.0.1:{port}",
            "--env-arg",
            f"data=http://127.0.0.1:{port}/p.csv",
        ]
    )
    assert args.address == f"tcp://127.0.0.1:{port}"
    assert args.run_config.env_kwargs == {"data": f"http://127.0.0.1:{port}/p.csv"}
    assert args.track_to == "sqlite:///m.db"  # a local scheme is a path
    assert not accepted  # parsing opens nothing


def test_the_cli_refuses_a_run_files_scheduler_before_connecting(tmp_path, listener):
    """As the adversary tried it: ``elegantpod tournament --config evil.yaml`` with a
    scheduler of theirs in the file, from a real shell command."""
    import subprocess

    port, accepted = listener
    run = tmp_path / "evil.yaml"
    run.write_text(f"env: Pendulum-v1\nmax_seconds: 5\naddress: tcp://127.0.0.1:{port}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", "tournament", "--config", str(run),
         "--store", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert f"{run}:3: 'address' is refused in a run file" in proc.stderr
    assert not accepted and not (tmp_path / "s").exists()


def test_a_search_space_file_with_a_key_twice_is_refused(tmp_path, capsys, monkeypatch):
    space = tmp_path / "space.json"
    space.write_text('{"ppo": {"lr": [1e-4, 1e-3], "lr": [0.5, 0.9]}}')
    args = ["tournament", "--env", "CartPole-v1", "--max-steps", "1000", "--search-space",
            space, "--store", tmp_path / "s"]  # fmt: skip
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert "space.json" in one_error(status, err) and "given twice" in err, err
    assert not (tmp_path / "s").exists()
