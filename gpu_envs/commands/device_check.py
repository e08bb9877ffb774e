"""``gpu-envs device-check``: CPU-vs-CUDA parity and CUDA throughput on one GPU, in a few minutes.

Parity: :func:`gpu_envs.benchmarks.parity.compare_devices` feeds the same seeds and the same random
actions to an env on the CPU and one on the GPU, step by step, with autoresets, and compares every
output and state array: floats within a per-dtype tolerance (the GPU compiler fuses multiply-adds,
so the last bits may differ), integer state exactly, except where a near-tie explains the
difference (a CartPole at a termination threshold, a runner at Tag's tagging margin, two of Tag's
neighbours at the same distance). A check passes when every difference is within tolerance or such
a near-tie, and fails on any other.

Throughput: env-steps/s of the CUDA env over a range of batch sizes, synchronised with
``torch.cuda.synchronize`` (protocol of :mod:`gpu_envs.benchmarks.timing`).

This command picks the games and their settings (:mod:`gpu_envs.device_check.plan`) and
reports; ``--quick`` runs small parity checks only.

``--full`` is the prepared GPU script, in four parts (``--only PART[,PART]``, repeatable, runs
some of them): ``parity`` (every game's kernels compiled at once in parallel processes, then the
parity of every game), ``lean`` (CartPole and Pendulum at 4096 / 65,536 / 2^20 envs, CartPole in
float32 too at 2^20, and Tag's seed config at 1000 / 10,000 games: env-steps/s of the lean step,
``validate_actions=False`` and ``copy_outputs=False``, with plain launches and with CUDA-graph
replay in interleaved rounds, and the host microseconds per step of each), ``trainer`` (the
bundled PPO's end-to-end env-steps/s for CartPole and the seed Tag config with
``trainer.cuda_graphs`` on and off, timed to the end of the last update; and the row ``ddp 2
GPUs``: the CartPole trainer on 2 GPUs, Fabric DDP over NCCL, against 1, where the machine has 2
GPUs, else skipped, saying why) and ``first-step`` (a
fresh process's first step with a cold and a warm kernel cache). It prints its plan first, each
part's estimated seconds on one H200 and the total (under 6 minutes), and judges the rows against
the GPU targets (:mod:`gpu_envs.device_check.targets`; "not measured" off a GPU).
``--full --small`` runs the same script at sizes the CPU (``--device cpu``) and the CUDA simulator
finish in seconds: the CI's proof that it runs end to end (graph rows are only measured on a real
GPU).

``--json PATH`` is rewritten after every check (atomically): a run cut short keeps every row it
measured, ``"finished": false`` saying so. A check that raises is a FAIL row; the run goes on.

Exit status: 0 all parity checks pass, 1 a check failed, 2 no usable CUDA GPU.
"""

from __future__ import annotations

import argparse

from gpu_envs.benchmarks import report
from gpu_envs.device_check.journal import FAIL_EXIT
from gpu_envs.device_check.plan import PARTS
from gpu_envs.device_check.runner import NO_GPU_EXIT, run

__all__ = ["FAIL_EXIT", "NO_GPU_EXIT", "add_parser", "run"]


def _log2_range(text: str) -> range:
    try:
        low, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LOW:HIGH (powers of two), got {text!r}"
        ) from None
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected 0 <= LOW <= HIGH, got {text!r}")
    return range(low, high + 1)


def _parts(text: str) -> list[str]:
    """``--only``'s value: comma-separated part names of :data:`PARTS`."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PARTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected parts of --full among {', '.join(PARTS)} (comma-separated), got {text!r}"
        )
    return names


def add_parser(subparsers) -> None:
    """Add ``gpu-envs device-check``."""
    parser = subparsers.add_parser(
        "device-check",
        help="CPU-vs-CUDA parity and CUDA throughput (needs a GPU)",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="cuda", help="CUDA device to check (cuda)")
    parser.add_argument("--parity-envs", type=int, default=4096, help="parity envs (4096)")
    parser.add_argument(
        "--parity-steps",
        type=int,
        default=500,
        help="parity steps of the single-agent games (500: 10 episodes of --max-episode-steps)",
    )
    parser.add_argument(
        "--max-episode-steps",
        type=int,
        default=50,
        help="truncation of the single-agent games in the parity runs, short to exercise it (50)",
    )
    parser.add_argument("--tag-parity-envs", type=int, default=64, help="Tag parity games (64)")
    parser.add_argument(
        "--tag-parity-steps",
        type=int,
        default=400,
        help="Tag parity steps (400: two episodes of the seed config)",
    )
    for game, low, high in (("cartpole", 10, 22), ("tag", 6, 12)):
        parser.add_argument(
            f"--{game}-log2",
            type=_log2_range,
            default=range(low, high + 1),
            metavar="LOW:HIGH",
            help=f"{game} throughput sizes 2^LOW..2^HIGH ({low}:{high})",
        )
    parser.add_argument(
        "--tag-scale-envs",
        type=int,
        default=2000,
        help="games of the 1000-agent Tag scale point (2000; 0 skips it)",
    )
    parser.add_argument(
        "--trainer-iterations",
        type=int,
        default=10,
        help="iterations of the seed run config's training timed end to end (10; 0 skips it)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per size (3)")
    parser.add_argument(
        "--target-seconds", type=float, default=0.3, help="length of one repeat (0.3)"
    )
    parser.add_argument("--warmup-seconds", type=float, default=0.3, help="minimum warm-up (0.3)")
    parser.add_argument("--skip-throughput", action="store_true", help="parity checks only")
    parser.add_argument(
        "--full",
        action="store_true",
        help="the prepared GPU script: parity of every game, the lean step with plain launches "
        "and graph replay at large sizes, the trainer with graphs on and off, the first step "
        "(under 6 minutes on one H200 by its printed estimate)",
    )
    parser.add_argument(
        "--only",
        type=_parts,
        action="append",
        metavar="PART[,PART]",
        help=f"run only these parts of --full ({', '.join(PARTS)}; implies --full); repeatable",
    )
    parser.add_argument(
        "--small",
        action="store_true",
        help="with --full: CI sizes (seconds on the CPU, --device cpu, or the CUDA simulator)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small parity runs of every game, no throughput: seconds on a GPU, minutes "
        "in the CUDA simulator (NUMBA_ENABLE_CUDASIM=1, the CI's simulated device)",
    )
    report.add_json_argument(parser, "the rows (rewritten after every check)")
    parser.set_defaults(func=run)
