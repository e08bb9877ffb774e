"""`gpu-envs bench cartpole`: records, tables, protocol and failure modes (device-check's tests:
tests/device_check/test_device_check.py).

No timed assertions: the machines are shared.
"""

import json
import statistics
import time

import pytest

from gpu_envs.benchmarks import cartpole as bench
from gpu_envs.benchmarks import machine, report, timing
from gpu_envs.cli import main


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
