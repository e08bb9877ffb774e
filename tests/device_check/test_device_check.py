"""``gpu-envs device-check``: its rows, plans, parts, estimates, targets, and a JSON file that keeps
every row measured when the run is cut short.

No timed assertions: the machines are shared. The parity checks behind device-check are tested on
the library (tests/benchmarks/test_parity.py); here the command's rows, with the CPU as both
reference and candidate.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import torch

from gpu_envs.cli import build_parser, main
from gpu_envs.commands import device_check as dc
from gpu_envs.device_check import lean, plan, rows, runner, targets, trainer
from gpu_envs.device_check.compile import warm_caches
from gpu_envs.device_check.journal import exit_status, format_table
from gpu_envs.device_check.trainer import ddp_throughput, trainer_throughput
from gpu_envs.engine.devices import cuda_available
from gpu_envs.games import GAMES
from gpu_envs.trainers import core

#: The parity checks: CartPole 2 dtypes x 2 autoreset modes, the registry's others 2 dtypes, Tag.
PARITY_CHECKS = 4 + 2 * (len(GAMES) - len(plan.DEDICATED_PARITY)) + 1
TIMING = dict(repeats=1, target_seconds=0.01, warmup_seconds=0.0)


def _args(*extra: str):
    args = build_parser().parse_args(["device-check", *extra])
    args.only = sorted({p for parts in args.only or () for p in parts}, key=plan.PARTS.index)
    return args


# ------------------------------------------------------------------------------------ arguments
@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
def test_device_check_without_gpu_exits_nonzero_with_a_message(capsys):
    assert main(["device-check"]) == dc.NO_GPU_EXIT
    assert "no usable CUDA GPU" in capsys.readouterr().err


def test_arguments_and_only():
    args = build_parser().parse_args(["device-check", "--cartpole-log2", "3:5", "--json"])
    assert args.cartpole_log2 == range(3, 6) and args.tag_log2 == range(6, 13)
    assert args.json == "-" and args.func is dc.run and args.only is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["device-check", "--cartpole-log2", "5:3"])
    # --only: comma lists, repeatable, in the script's order
    assert _args("--only", "trainer,parity", "--only", "first-step").only == [
        "parity",
        "trainer",
        "first-step",
    ]
    for bad in ("gpu", ",", "lean,train"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["device-check", "--only", bad])


# ------------------------------------------------------------------------------------ plans
def test_the_plain_plan():
    assert len(plan.plan(_args("--skip-throughput"))) == PARITY_CHECKS
    throughput_checks = 1 + 1 + 1 + 1  # CartPole, Tag, Tag's scale point, the trainer
    args = _args()
    assert args.tag_scale_envs == 2000 and args.trainer_iterations == 10
    assert len(plan.plan(args)) == PARITY_CHECKS + throughput_checks
    args = _args("--tag-scale-envs", "0", "--trainer-iterations", "0")
    assert len(plan.plan(args)) == PARITY_CHECKS + 2


def test_the_full_plan_at_ci_sizes_has_every_part():
    """``--full --small`` (run end to end by .ci/run): every parity check, one lean-step size per
    game, the trainer for CartPole and Tag (graphs on as well where torch has CUDA), the cold and
    warm first step of CartPole and Tag; no separate kernel compile."""
    checks = plan.full_plan(_args("--full", "--small", "--device", "cpu"))
    trainer_runs = 2 * (2 if torch.cuda.is_available() else 1) + 1  # and the DDP row
    parts = [c.part for c in checks]
    assert (
        parts
        == ["parity"] * PARITY_CHECKS
        + ["lean"] * 3
        + ["trainer"] * trainer_runs
        + ["first-step"] * 2
    )
    assert all(c.estimate_s is not None and c.estimate_s > 0 for c in checks)


def test_the_full_plan_fits_six_minutes_on_a_gpu(monkeypatch):
    """At full size, on a machine with CUDA (the trainer with graphs on and off): the kernel
    compile first, every lean size of :data:`plan.FULL_LEAN`, and an estimate under 6 minutes."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    checks = plan.full_plan(_args("--full"))
    assert checks[0].what == "kernel compile"
    assert [c.part for c in checks].count("trainer") == 5  # graphs off and on x 2 games, DDP
    (ddp,) = [c for c in checks if c.what == "ddp 2 GPUs"]
    assert ddp.estimate_s == plan.ESTIMATE_SKIPPED_S  # one GPU: the row is skipped
    lean_checks = [c for c in checks if c.part == "lean"]
    assert [(c.run.args[0], c.run.args[1], c.run.args[5]) for c in lean_checks] == [
        (game, n, dtype) for game, sizes in plan.FULL_LEAN.items() for n, dtype in sizes
    ]
    assert (2**20, "float32") in plan.FULL_LEAN["cartpole"]  # the float32 target's row
    assert 200 < plan.total_estimate(checks) <= 360
    # the parity was sized to fit: each single-agent game 10 episodes of 50 steps
    args = _args("--full")
    assert args.parity_steps == 500 and args.max_episode_steps == 50
    assert args.tag_parity_steps == 400  # two Tag episodes (T = 200): the autoreset and a second


def test_the_ddp_row_is_planned_at_its_size_where_2_gpus_are(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    (ddp,) = [c for c in plan.full_plan(_args("--full")) if c.what == "ddp 2 GPUs"]
    assert ddp.part == "trainer" and ddp.run.args == ("cuda", plan.DDP_ENVS, 10)
    assert 30 < ddp.estimate_s < 60
    (small,) = [
        c for c in plan.full_plan(_args("--only", "trainer", "--small")) if c.what == ddp.what
    ]
    assert small.run.args == ("cuda", plan.SMALL_DDP_ENVS, 2)


def test_only_runs_the_parts_it_names():
    checks = plan.full_plan(_args("--full", "--small", "--device", "cpu", "--only", "lean"))
    assert {c.part for c in checks} == {"lean"} and len(checks) == 3
    checks = plan.full_plan(_args("--only", "first-step,trainer", "--small", "--device", "cpu"))
    assert {c.part for c in checks} == {"trainer", "first-step"}


def test_the_plan_printout():
    checks = [
        plan.Check("parity", "a", list, 12.0),
        plan.Check("parity", "b", list, 3.0),
        plan.Check("lean", "c", list, 45.0),
    ]
    text = plan.format_plan(checks, "plan")
    lines = text.splitlines()
    assert lines[0] == "plan"
    assert lines[2].split() == ["parity", "2", "checks", "~", "15", "s"]
    assert lines[3].split() == ["lean", "1", "checks", "~", "45", "s"]
    total = plan.ESTIMATE_START_S + 60
    assert lines[-1].split()[:3] == ["total", "~", f"{total:.0f}"]
    assert f"({total / 60:.1f} min)" in lines[-1]


# ------------------------------------------------------------------------------------ the run
def _fake_full_plan(*checks):
    return lambda args: list(checks)


def test_the_run_prints_its_plan_writes_each_row_and_keeps_going(monkeypatch, tmp_path, capsys):
    path = tmp_path / "rows.json"
    seen = []

    def second():
        seen.append(json.loads(path.read_text()))  # the file as the second check starts
        raise RuntimeError("broken\nin two lines")

    monkeypatch.setattr(
        runner,
        "full_plan",
        _fake_full_plan(
            plan.Check("parity", "one", lambda: [rows.Row("one", "s", "r", "PASS")], 1.0),
            plan.Check("lean", "two", second, 2.0),
            plan.Check("lean", "three", lambda: [rows.Row("three", "s", "r")], 3.0),
        ),
    )
    code = main(["device-check", "--full", "--device", "cpu", "--json", str(path)])
    out = capsys.readouterr()
    assert code == dc.FAIL_EXIT  # the broken check is a FAIL row
    assert "plan (estimated seconds on one H200" in out.out
    assert "RuntimeError: broken" in out.err
    (before,) = seen
    assert not before["finished"] and [r["check"] for r in before["rows"]] == ["one"]
    assert before["plan"][1] == {"part": "lean", "what": "two", "estimate_s": 2.0}
    document = json.loads(path.read_text())
    assert document["finished"]
    assert [(r["check"], r["status"]) for r in document["rows"]] == [
        ("one", "PASS"),
        ("two", "FAIL"),
        ("three", ""),
    ]
    assert document["rows"][1]["result"] == "error: RuntimeError: broken"
    assert document["rows"][1]["record"]["error"] == "RuntimeError: broken\nin two lines"
    assert [c["what"] for c in document["checks"]] == ["one", "two", "three"]
    assert all(c["seconds"] >= 0 for c in document["checks"])
    assert {t["status"] for t in document["targets"]} == {targets.NOT_MEASURED}
    assert not list(tmp_path.glob(".device-check-*"))  # no temporary file left behind


def test_a_run_stopped_midway_keeps_the_rows_measured(monkeypatch, tmp_path):
    """A check interrupted (Ctrl-C, a timeout's signal) ends the run; the file holds the rows
    of every check before it."""
    path = tmp_path / "rows.json"

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(
        runner,
        "full_plan",
        _fake_full_plan(
            plan.Check("parity", "one", lambda: [rows.Row("one", "s", "r", "PASS")], 1.0),
            plan.Check("lean", "two", interrupted, 2.0),
        ),
    )
    assert main(["device-check", "--full", "--device", "cpu", "--json", str(path)]) == 130
    document = json.loads(path.read_text())
    assert not document["finished"] and [r["check"] for r in document["rows"]] == ["one"]


def test_a_killed_run_keeps_its_rows(tmp_path):
    """The real command, killed (SIGKILL) once its first rows are on disk: the file is whole JSON
    holding them."""
    path = tmp_path / "rows.json"
    command = [sys.executable, "-m", "gpu_envs.cli", "device-check", "--full", "--small"]
    command += ["--device", "cpu", "--only", "parity", "--json", str(path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        document: dict = {}
        while time.monotonic() < deadline and process.poll() is None:
            if path.exists():
                document = json.loads(path.read_text())  # never a partial file
                if document["rows"]:
                    break
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert document["rows"][0]["check"] == "cartpole parity"
    final = json.loads(path.read_text())
    assert final["rows"][: len(document["rows"])] == document["rows"]


# ------------------------------------------------------------------------------------ rows
def test_parity_rows_report_the_library_check():
    spec = rows.cartpole_spec(num_envs=4, steps=30, max_episode_steps=10)
    row = rows.parity_row(spec, "cpu")
    assert row.status == "PASS", row.result
    assert row.setting.endswith("max_episode_steps=10, cpu vs cpu")
    assert row.record["kind"] == "parity" and row.record["game"] == "cartpole"
    assert row.record["diverged_envs"] == 0 and row.record["steps"] == 30
    row = rows.parity_row(rows.game_spec("pendulum", num_envs=3, steps=20), "cpu")
    assert row.status == "PASS" and row.record["game"] == "pendulum", row.result
    assert rows.ParitySpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_table_and_exit_status():
    found = [
        rows.Row("cartpole parity", "float64", "max |diff| 0", "PASS"),
        rows.Row(
            "cartpole lean step",
            "2^20 envs",
            "1M env-steps/s",
            targets=[{"target": "t", "bound": ">= 1", "status": "met"}],
        ),
    ]
    table = format_table(found)
    assert table.splitlines()[0] == "| check | setting | result | status | target |"
    assert "| cartpole lean step | 2^20 envs | 1M env-steps/s |  | t >= 1: met |" in table
    assert exit_status(found) == 0
    assert exit_status(found + [rows.Row("tag parity", "", "", "FAIL")]) == dc.FAIL_EXIT


def test_tag_parity_and_throughput_rows_on_cpu():
    row = rows.parity_row(rows.tag_spec(num_envs=2, steps=12), "cpu")
    assert row.status == "PASS", row.result
    assert row.record["near_ties"] == [] and row.record["mismatches"] == []
    found = rows.tag_throughput("cpu", range(0, 1), TIMING)
    assert found[0].record["agents_per_env"] == 105 and "agent-steps/s" in found[0].result


def test_the_lean_step_rows_on_cpu():
    options = dict(TIMING, calls_per_repeat=2)
    plain, graph = lean.lean_throughput("cartpole", 4, "cpu", True, options, "float32")
    assert plain.record["launch"] == "plain launches" and plain.record["host_us_per_step"] > 0
    assert plain.record["dtype"] == "float32" and "float32" in plain.setting
    assert graph.result == "not run: not on a CUDA GPU"


def test_scale_point_and_trainer_rows_on_cpu(capsys):
    (row,) = rows.tag_scale_throughput("cpu", 1, TIMING)
    assert row.record["agents_per_env"] == 1000 and "agent-steps/s" in row.result
    small = ["trainer.num_envs=2", "trainer.train_batch_size=20", "env.num_runners=6"]
    (row,) = trainer_throughput("cpu", 2, small)
    assert row.record["iterations"] == 2 and row.record["env_steps"] == 40
    assert row.record["env_steps_per_s"] > 0 and "env-steps/s" in row.result
    assert capsys.readouterr().out == ""  # the run's console output went to stderr


def test_the_ddp_row_says_why_it_is_skipped(monkeypatch):
    """Fewer than 2 GPUs (this machine, the CUDA simulator), or ``--device cpu``: a row saying it
    was skipped and why, nothing run."""
    (row,) = ddp_throughput("cuda", 8, 2)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 2:
        assert row.result == (
            f"skipped: {gpus} CUDA GPU(s) here (torch.cuda.device_count()); the row needs 2 or more"
        )
        assert row.record["skipped"] == row.result.removeprefix("skipped: ")
    assert row.check == "ddp 2 GPUs" and row.status == ""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    (row,) = ddp_throughput("cpu", 8, 2)
    assert row.result == "skipped: --device cpu checks the CPU; the row trains on 2 CUDA GPUs"


def test_the_ddp_row_on_2_gpus_reports_2_against_1(monkeypatch):
    """With 2 GPUs: a 1-process and a 2-process run of the CartPole trainer on CUDA (faked
    here: their commands are tested by tests/benchmarks/test_bench_ddp.py), and their ratio."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    calls = []

    def fake_speed(processes, envs, iterations, basedir, accelerator):
        calls.append((processes, envs, iterations, accelerator))
        return {"processes": processes, "env_steps_per_s": 1e6 * (1.0 if processes == 1 else 1.8)}

    monkeypatch.setattr(trainer, "train_speed", fake_speed)
    (row,) = ddp_throughput("cuda", 4096, 10)
    assert calls == [(1, 4096, 10, "cuda"), (2, 4096, 10, "cuda")]
    assert row.result == "1.8M env-steps/s on 2 GPUs, 1M on 1: 1.80x"
    assert row.record["ratio"] == pytest.approx(1.8) and row.record["env_steps_per_s"] == 1.8e6
    assert "skipped" not in row.record


def test_the_ddp_row_of_the_ci_command_is_skipped_on_the_cpu(tmp_path):
    """``gpu-envs device-check --full --small --device cpu`` (as .ci/run; its trainer part): the
    DDP row is written, skipped with the reason, and the run passes."""
    path = tmp_path / "rows.json"
    command = [sys.executable, "-m", "gpu_envs.cli", "device-check", "--full", "--small"]
    command += ["--device", "cpu", "--only", "trainer", "--json", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = [r for r in json.loads(path.read_text())["rows"] if r["check"] == "ddp 2 GPUs"]
    assert row["result"].startswith("skipped: ") and row["record"]["skipped"]
    assert "| ddp 2 GPUs | cartpole preset, 8 envs per GPU" in done.stdout


def test_the_trainer_clock_stops_after_the_last_update(monkeypatch):
    """The final checkpoint (and the plot, the folder's closing) come after the clock: a slow
    save shows in ``train_seconds`` only."""
    save = core.TrainingRun.save

    def slow_save(self, path):
        time.sleep(1.0)
        save(self, path)

    monkeypatch.setattr(core.TrainingRun, "save", slow_save)
    small = ["trainer.num_envs=2", "trainer.train_batch_size=8", "trainer.compile=false"]
    (row,) = trainer_throughput("cpu", 2, [*small, "evaluation.eval_freq=0"], "cartpole")
    record = row.record
    assert record["train_seconds"] - record["update_seconds"] >= 1.0
    assert record["env_steps_per_s"] == pytest.approx(
        record["env_steps"] / record["update_seconds"]
    )


def test_the_kernel_compile_runs_apart_and_names_a_failure():
    good = rows.cartpole_spec(num_envs=4, steps=3)
    bad = rows.ParitySpec("cartpole", 4, 3, {"dtype": "float16"}, "bad dtype")
    (row,) = warm_caches([good, good, bad], "cpu", workers=2)
    assert row.record["configs"] == 2 and row.record["workers"] == 2
    (failure,) = row.record["failed"]
    assert failure.startswith("cartpole (bad dtype): ") and "float16" in failure


# ------------------------------------------------------------------------------------ targets
def _lean_row(**record) -> rows.Row:
    return rows.Row("cartpole lean step", "", "", record={"game": "cartpole", **record})


def test_each_gpu_target_is_judged_against_its_rows():
    big = dict(num_envs=2**20, launch="plain launches")
    fast64 = _lean_row(dtype="float64", env_steps_per_s=25e9, host_us_per_step=4.0, **big)
    slow32 = _lean_row(dtype="float32", env_steps_per_s=25e9, host_us_per_step=12.0, **big)
    graph = _lean_row(dtype="float64", num_envs=4096, launch="graph replay", host_us_per_step=1.5)
    marked = [targets.mark(r, on_gpu=True) for r in (fast64, slow32, graph)]
    assert [(t["target"], t["status"]) for t in marked[0].targets] == [
        ("CartPole float64, 2^20 envs", "met"),
        ("host work per plain step", "met"),
    ]
    assert [t["status"] for t in marked[1].targets] == ["not met", "not met"]
    assert [t["bound"] for t in marked[1].targets] == [">= 30G env-steps/s", "<= 10 us"]
    assert [t["status"] for t in marked[2].targets] == ["met"]
    verdicts = {t["target"]: t["status"] for t in targets.summary(marked, on_gpu=True)}
    assert verdicts == {
        "CartPole float64, 2^20 envs": "met",
        "CartPole float32, 2^20 envs": "not met",
        "host work per plain step": "not met",
        "host work per graph-replayed step": "met",
    }


def test_targets_off_a_gpu_are_not_measured():
    row = targets.mark(
        _lean_row(dtype="float64", num_envs=2**20, launch="plain launches", host_us_per_step=1.0),
        on_gpu=False,
    )
    assert {t["status"] for t in row.targets} == {"not measured"}
    assert targets.mark(rows.Row("tag parity", "", ""), on_gpu=True).targets == []
    assert {t["status"] for t in targets.summary([], on_gpu=True)} == {"not measured"}
