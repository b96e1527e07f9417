"""Command line: ``elegantpod train`` and ``elegantpod demo``."""

from __future__ import annotations

import argparse
import sys

from elegantpod.config import parse_assignments


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="elegantpod", description="Cloud-native deep RL pods.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train one pod")
    t.add_argument("--env", required=True, help="native or gymnasium env id")
    t.add_argument("--algo", required=True, help="ppo or sac")
    t.add_argument("--num-envs", type=int, default=None, help="parallel sub-envs")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-steps", type=int, default=None, help="env-step budget")
    t.add_argument("--max-seconds", type=float, default=None, help="wall-clock budget")
    t.add_argument(
        "--target-reward", type=float, default=None, help="stop when eval mean reaches it"
    )
    t.add_argument("--set", action="append", metavar="KEY=VALUE", default=[], help="hyperparameter")
    t.add_argument("--device", default="cpu")
    t.add_argument("--out", default=None, help="directory for checkpoint, spec and result")
    t.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    t.add_argument("--resume", action="store_true", help="continue the run in --out")
    t.add_argument("--json", action="store_true", help="print the result as one JSON line")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    d = sub.add_parser("demo", help="the showcase run on the embedded default")
    d.add_argument("--seed", type=int, default=0)
    return p


def _train(args) -> int:
    from elegantpod.training import result_json, train

    hparams = parse_assignments(args.set)
    result = train(
        args.env,
        args.algo,
        seed=args.seed,
        num_envs=args.num_envs,
        max_steps=args.max_steps,
        max_seconds=args.max_seconds,
        target_reward=args.target_reward,
        device=args.device,
        out=args.out,
        overwrite=args.overwrite,
        resume=args.resume,
        progress=not args.quiet,
        **hparams,
    )
    if args.json:
        print(result_json(result), flush=True)
    else:
        status = "solved" if result.solved else "finished"
        print(
            f"{result.algo} on {result.env}: {status}, eval return "
            f"{result.eval_return_mean:.1f} +- {result.eval_return_std:.1f} after "
            f"{result.env_steps} steps in {result.wall_seconds:.1f}s"
            + (f"; checkpoint {result.checkpoint}" if result.checkpoint else "")
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input prints one ``error:`` line and exits with status 2."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "train":
            return _train(args)
        from elegantpod.demo import run_demo

        return run_demo(seed=args.seed)
    except ValueError as exc:  # CheckpointError is a ValueError too
        print(f"elegantpod: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
