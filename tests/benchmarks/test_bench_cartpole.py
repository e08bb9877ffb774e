"""`gpu-envs bench cartpole` and `gpu-envs device-check`: records, tables, protocol and failure
modes.

No timed assertions: the machines are shared. The parity checks behind device-check are tested on
the library (tests/benchmarks/test_parity.py); here, the command's rows, plan and exit status, with
the CPU as
both reference and candidate.
"""

import json
import statistics
import time

import pytest
import torch

from gpu_envs.benchmarks import cartpole as bench
from gpu_envs.benchmarks import machine, report, timing
from gpu_envs.cli import build_parser, main
from gpu_envs.commands import device_check as dc
from gpu_envs.engine.devices import cuda_available
from gpu_envs.games import GAMES


def _run_bench(capsys, *extra):
    code = main(
        [
            "bench",
            "cartpole",
            "--quick",
            "--num-envs",
            "1,16",
            "--devices",
            "cpu",
            "--skip-first-step",
            "--json",
            "-",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    return json.loads(captured.out), captured.err


def test_bench_cartpole_quick_writes_well_formed_records(capsys):
    document, err = _run_bench(capsys)
    assert document["benchmark"] == "cartpole"
    assert document["machine"]["cpu_count"] >= 1
    throughput = [r for r in document["records"] if r["kind"] == "throughput"]
    keys = {(r["impl"], r["num_envs"]) for r in throughput}
    expected = {
        (impl, n)
        for impl in (
            "gpu_envs_cpu",
            "gpu_envs_cpu_novalidate",
            "gpu_envs_cpu_reuse",
            "gym_vector",
            "gym_sync",
        )
        for n in (1, 16)
    }
    assert keys == expected
    for record in throughput:
        assert record["env_steps_per_s"] > 0
        assert len(record["repeat_rates"]) == 2
        assert record["env_steps_per_s"] == pytest.approx(statistics.median(record["repeat_rates"]))
        assert record["warmup_calls"] >= 2
        assert record["first_call_s"] >= 0
        assert isinstance(record["noisy"], bool)
        assert record["steps_per_call"] == record["num_envs"]
    ours = [r for r in throughput if r["impl"] == "gpu_envs_cpu"]
    assert {r["dtype"] for r in ours} == {"float64"}
    # The table goes to stderr when the JSON takes stdout, with the ratio rows.
    assert "| gymnasium CartPoleVectorEnv (numpy) |" in err
    assert "ratio gpu_envs cpu / gymnasium CartPoleVectorEnv" in err


def test_bench_cartpole_skips_sync_vector_env_above_the_limit(capsys):
    document, err = _run_bench(capsys, "--sync-max-envs", "8", "--dtype", "float32")
    skipped = [r for r in document["records"] if r["kind"] == "skipped"]
    assert [(r["impl"], r["num_envs"]) for r in skipped] == [("gym_sync", 16)]
    assert "skipped above 8 envs" in err
    assert {
        r["dtype"] for r in document["records"] if r["impl"] == "gpu_envs_cpu" and "dtype" in r
    } == {"float32"}


def test_bench_cartpole_rejects_bad_sizes_and_devices():
    with pytest.raises(SystemExit, match="num-envs"):
        main(["bench", "cartpole", "--quick", "--num-envs", "1,x"])
    with pytest.raises(SystemExit, match="devices"):
        main(["bench", "cartpole", "--quick", "--num-envs", "1", "--devices", "tpu"])


def test_first_step_of_a_fresh_process_is_reported():
    records = bench.measure_first_step("cpu", runs=1)
    assert [r["num_envs"] for r in records] == list(bench.FIRST_STEP_NUM_ENVS)
    for record in records:
        assert record["kind"] == "first_step" and record["run"] == 1
        assert record["first_step_s"] > 0 and record["import_s"] > 0
    table = bench.format_first_steps(records)
    assert "first step (s)" in table and "| cpu | 16 |" in table


def test_measure_rounds_interleaves_the_repeats_of_every_implementation():
    log = []
    results = timing.measure_rounds(
        {
            "a": timing.Runner(lambda: log.append("a"), 4),
            "b": timing.Runner(lambda: log.append("b"), 8),
        },
        repeats=3,
        target_seconds=0.005,
        warmup_seconds=0.0,
        warmup_calls=3,
    )
    a, b = results["a"], results["b"]
    assert len(a.chosen) == len(b.chosen) == 3 and a.steps_per_call == 4 and b.steps_per_call == 8
    warm = 1 + a.warmup_calls + 1 + b.warmup_calls
    rounds = log[warm:]
    per_round = a.calls_per_repeat + b.calls_per_repeat
    assert len(rounds) == 3 * per_round
    for r in range(3):  # each round: one repeat of a, then one of b
        block = rounds[r * per_round : (r + 1) * per_round]
        assert block == ["a"] * a.calls_per_repeat + ["b"] * b.calls_per_repeat


def test_median_ratio_pairs_repeats_by_round():
    def measurement(rates):
        repeats = tuple(timing.Repeat(rate, 1.0, 0.0) for rate in rates)
        return timing.Measurement(statistics.median(rates), 0.0, 1, 1, 1, 0.0, repeats, repeats)

    ours, reference = measurement([2.0, 4.0, 9.0]), measurement([1.0, 4.0, 3.0])
    assert (
        timing.median_ratio(ours, reference) == 2.0
    )  # rounds: 2, 1, 3 (ratio of the medians: 4/3)
    assert timing.median_ratio(ours.to_dict(), reference.to_dict()) == 2.0
    assert timing.median_ratio(measurement([2.0, 4.0]), reference) == 1.0  # unpaired: medians 3 / 3


def test_format_table_marks_noisy_cells_and_skips():
    base = dict(kind="throughput", noisy=False, first_call_s=0.5)
    records = [
        dict(base, impl="gpu_envs_cpu", label="ours", num_envs=1, env_steps_per_s=3e6, noisy=True),
        dict(base, impl="gym_vector", label="gym", num_envs=1, env_steps_per_s=1e6),
        dict(kind="skipped", impl="gym_sync", label="sync", num_envs=1, reason="too slow"),
    ]
    table = bench.format_table(records, [1], ["a note"])
    assert "| ours | 3M† | 0.50 |" in table
    assert "| ratio ours / gymnasium CartPoleVectorEnv | 3.00x |  |" in table
    assert "| sync | skipped |  |" in table
    assert (
        "skipped: too slow" in table and "note: a note" in table and "†" in table.split("\n\n")[1]
    )


def test_measure_follows_the_protocol():
    calls, syncs = [], []
    result = timing.measure(
        timing.Runner(lambda: calls.append(1), 10, lambda: syncs.append(1)),
        repeats=3,
        target_seconds=0.01,
        warmup_seconds=0.01,
        warmup_calls=5,
    )
    assert result.warmup_calls >= 5
    assert len(result.chosen) == 3 and len(result.attempts) == 3
    assert result.env_steps_per_s == statistics.median(result.repeat_rates)
    assert len(calls) == 1 + result.warmup_calls + 3 * result.calls_per_repeat
    assert len(syncs) == 1 + 1 + 3  # after the first call, the warm-up and each repeat
    assert result.to_dict()["steps_per_call"] == 10
    with pytest.raises(ValueError):
        timing.measure(timing.Runner(lambda: None, 0))


def test_background_load_is_a_fraction_or_unknown():
    monitor = machine.BackgroundLoad()
    monitor.start()
    # The system's CPU times count in 10 ms ticks: a window of a few ms can see one tick of
    # another process and read as several CPUs busy, so the window spans many ticks.
    deadline = time.perf_counter() + 0.3
    while time.perf_counter() < deadline:
        pass
    load = monitor.stop()
    assert load is None or 0.0 <= load <= 1.5


def test_format_rate():
    assert [report.format_rate(v) for v in (12.0, 1234.0, 1.5e6, 2e9)] == [
        "12",
        "1.23k",
        "1.5M",
        "2G",
    ]


# ------------------------------------------------------------------------------------ device-check
#: device-check's parity checks: CartPole 4, Pendulum 2, the registry's others 2 each, Tag 1.
PARITY_CHECKS = 4 + 2 + 2 * (len(GAMES) - len(dc.DEDICATED_PARITY)) + 1


@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
def test_device_check_without_gpu_exits_nonzero_with_a_message(capsys):
    assert main(["device-check"]) == dc.NO_GPU_EXIT
    assert "no usable CUDA GPU" in capsys.readouterr().err


def test_device_check_arguments():
    args = build_parser().parse_args(["device-check", "--cartpole-log2", "3:5", "--json"])
    assert args.cartpole_log2 == range(3, 6) and args.tag_log2 == range(6, 13)
    assert args.json == "-" and args.func is dc.run
    with pytest.raises(SystemExit):
        build_parser().parse_args(["device-check", "--cartpole-log2", "5:3"])
    args = build_parser().parse_args(["device-check", "--skip-throughput"])
    plan = dc.plan(args)
    # CartPole: 2 dtypes x 2 autoreset modes, Pendulum: 2 dtypes, the others: 2 dtypes, Tag
    assert len(plan) == PARITY_CHECKS


def test_parity_rows_report_the_library_check():
    row = dc.cartpole_parity("cpu", num_envs=4, steps=30, max_episode_steps=10)
    assert row.status == "PASS", row.result
    assert row.setting.endswith("max_episode_steps=10, cpu vs cpu")
    assert row.record["kind"] == "parity" and row.record["game"] == "cartpole"
    assert row.record["diverged_envs"] == 0 and row.record["steps"] == 30
    row = dc.pendulum_parity("cpu", num_envs=3, steps=20)
    assert row.status == "PASS" and row.record["game"] == "pendulum", row.result


def test_device_check_table_and_exit_status():
    rows = [
        dc.Row("cartpole parity", "float64", "max |diff| 0", "PASS"),
        dc.Row("cartpole throughput", "2^10 envs", "1M env-steps/s"),
    ]
    table = dc.format_table(rows)
    assert table.splitlines()[0] == "| check | setting | result | status |"
    assert "| cartpole throughput | 2^10 envs | 1M env-steps/s |  |" in table
    assert dc.exit_status(rows) == 0
    assert dc.exit_status(rows + [dc.Row("tag parity", "", "", "FAIL")]) == dc.FAIL_EXIT


def test_tag_parity_and_throughput_rows_on_cpu():
    row = dc.tag_parity("cpu", num_envs=2, steps=12)
    assert row.status == "PASS", row.result
    assert row.record["near_ties"] == [] and row.record["mismatches"] == []
    rows = dc.tag_throughput(
        "cpu", range(0, 1), dict(repeats=1, target_seconds=0.01, warmup_seconds=0.0)
    )
    assert rows[0].record["agents_per_env"] == 105 and "agent-steps/s" in rows[0].result


def test_the_full_plan_adds_the_scale_point_and_the_trainer():
    args = build_parser().parse_args(["device-check"])
    assert args.tag_scale_envs == 2000 and args.trainer_iterations == 10
    throughput_checks = 1 + 1 + 1 + 1  # CartPole, Tag, Tag's scale point, the trainer
    assert len(dc.plan(args)) == PARITY_CHECKS + throughput_checks
    args = build_parser().parse_args(
        ["device-check", "--tag-scale-envs", "0", "--trainer-iterations", "0"]
    )
    assert len(dc.plan(args)) == PARITY_CHECKS + 2


def test_the_prepared_gpu_script_at_ci_sizes_has_every_part():
    """``--full --small`` (run end to end by .ci/run): every parity check, one lean-step size per
    game, the trainer for CartPole and Tag (graphs on as well where torch has CUDA), the cold and
    warm first step of CartPole and Tag."""
    args = build_parser().parse_args(["device-check", "--full", "--small", "--device", "cpu"])
    trainer_rows = 2 * (2 if torch.cuda.is_available() else 1)
    assert len(dc.full_plan(args)) == PARITY_CHECKS + 3 + trainer_rows + 2
    assert args.parity_envs == 16 and args.tag_params == dc.SMALL_TAG
    args = build_parser().parse_args(["device-check", "--full"])
    lean = [
        step for step in dc.full_plan(args) if getattr(step, "func", None) is dc.lean_throughput
    ]
    assert sorted((step.args[0], step.args[1]) for step in lean) == sorted(
        (game, n) for game, sizes in dc.FULL_SIZES.items() for n in sizes
    )


def test_the_lean_step_rows_on_cpu():
    options = dict(repeats=1, target_seconds=0.01, warmup_seconds=0.0, calls_per_repeat=2)
    plain, graph = dc.lean_throughput("cartpole", 4, "cpu", True, options)
    assert plain.record["launch"] == "plain launches" and plain.record["host_us_per_step"] > 0
    assert graph.result == "not run: not on a CUDA GPU"


def test_scale_point_and_trainer_rows_on_cpu(capsys):
    timing_options = dict(repeats=1, target_seconds=0.01, warmup_seconds=0.0)
    (row,) = dc.tag_scale_throughput("cpu", 1, timing_options)
    assert row.record["agents_per_env"] == 1000 and "agent-steps/s" in row.result
    small = ["trainer.num_envs=2", "trainer.train_batch_size=20", "env.num_runners=6"]
    (row,) = dc.trainer_throughput("cpu", 2, small)
    assert row.record["iterations"] == 2 and row.record["env_steps"] == 40
    assert row.record["env_steps_per_s"] > 0 and "env-steps/s" in row.result
    assert capsys.readouterr().out == ""  # the run's console output went to stderr
