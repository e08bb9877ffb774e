"""`gpu-envs bench pendulum` and the bare-kernel rows of the shared single-agent benchmark.

No timed assertions: the machines are shared.
"""

import json

import numba
import numpy as np

from gpu_envs.benchmarks import cartpole as shared
from gpu_envs.benchmarks import pendulum as bench
from gpu_envs.cli import main


def test_bench_pendulum_quick_measures_ours_the_bare_kernel_and_gymnasium(capsys):
    code = main(
        [
            "bench",
            "pendulum",
            "--quick",
            "--num-envs",
            "1,4",
            "--devices",
            "cpu",
            "--skip-first-step",
            "--bare-kernel",
            "--json",
            "-",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    document = json.loads(captured.out)
    assert document["benchmark"] == "pendulum"
    threads = sorted({1, numba.config.NUMBA_NUM_THREADS})
    impls = [
        "gpu_envs_cpu",
        "gpu_envs_cpu_novalidate",
        "gpu_envs_cpu_reuse",
        *(f"bare_cpu_{t}t" for t in threads),
        "gym_sync",
    ]
    throughput = [r for r in document["records"] if r["kind"] == "throughput"]
    assert {(r["impl"], r["num_envs"]) for r in throughput} == {
        (i, n) for i in impls for n in (1, 4)
    }
    assert all(r["env_steps_per_s"] > 0 and len(r["repeat_rates"]) == 2 for r in throughput)
    assert {r["vector_class"] for r in throughput if r["impl"] == "gym_sync"} == {"SyncVectorEnv"}
    assert {r["dtype"] for r in throughput if r["impl"].startswith(("gpu_envs", "bare"))} == {
        "float64"
    }
    assert {r["numba_threads"] for r in throughput if r["impl"].startswith("bare")} == set(threads)
    # Pendulum has no gymnasium vector implementation: a note says so and SyncVectorEnv is the
    # reference.
    assert any("no vector implementation of Pendulum-v1" in note for note in document["notes"])
    assert "| ratio gpu_envs cpu / gymnasium SyncVectorEnv |" in captured.err
    assert "| ratio gpu_envs cpu / faster bare kernel |" in captured.err


def test_pendulum_actions_are_torques_in_range():
    pool = bench.PENDULUM.random_actions(np.random.default_rng(0), 8, 5)
    assert pool.shape == (8, 5, 1) and pool.dtype == np.float32
    assert pool.min() >= -2.0 and pool.max() <= 2.0 and len(np.unique(pool)) == pool.size


def test_bare_kernel_runner_steps_the_env_and_restores_the_thread_count():
    default = numba.get_num_threads()
    runner = shared.bare_kernel_runner(1, None, bench.PENDULUM)(4, 0)
    env = runner.close.__self__  # the runner frees its env with env.close
    try:
        start = env.state_snapshot()
        for _ in range(3):
            runner.call()
        after = env.state_snapshot()
        assert after["elapsed"].tolist() == [3] * 4
        assert not np.array_equal(after["state"].numpy(), start["state"].numpy())
        assert numba.get_num_threads() == default
    finally:
        runner.close()


def test_ratio_to_the_faster_bare_kernel_takes_the_faster_in_each_round():
    def record(impl, rates):
        return dict(
            kind="throughput",
            impl=impl,
            label=impl,
            num_envs=8,
            noisy=False,
            first_call_s=0.0,
            repeat_rates=rates,
            env_steps_per_s=float(np.median(rates)),
        )

    records = [
        record("gpu_envs_cpu", [4.0, 4.0, 4.0]),
        record("bare_cpu_1t", [8.0, 2.0, 2.0]),
        record("bare_cpu_2t", [2.0, 8.0, 2.0]),
    ]
    table = shared.format_table(records, [8], [])
    assert "| ratio gpu_envs_cpu / bare kernel, 1 thread | 2.00x |  |" in table
    # per round the faster is 8, 8, 2: ratios 0.5, 0.5, 2 (the faster median, 2, would give 2.00x)
    assert "| ratio gpu_envs_cpu / faster bare kernel | 0.50x |  |" in table


def test_first_step_of_a_fresh_pendulum_process_is_reported():
    records = shared.measure_first_step(
        "cpu", runs=1, env_class=bench.PENDULUM.env_class, sizes=(3,)
    )
    assert [(r["env_class"], r["num_envs"]) for r in records] == [("PendulumVectorEnv", 3)]
    assert records[0]["first_step_s"] > 0
    assert (
        "| run 1 (may fill the cache) | PendulumVectorEnv | cpu | 3 |"
        in shared.format_first_steps(records)
    )
