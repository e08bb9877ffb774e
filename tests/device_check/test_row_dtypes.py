"""Every row of the device check names its float dtype and runs in it: a classic game's default
dtype depends on the device (float64 on the CPU and the simulator, float32 on a GPU), so a row
that left it to the default measured float32 on the GPU under a float64 target (issue 46)."""

import pytest
import torch

from gpu_envs.cli import build_parser
from gpu_envs.device_check import lean, plan, rows

TIMING = dict(repeats=1, target_seconds=0.01, warmup_seconds=0.0, calls_per_repeat=2)


def _full_plan_on_a_gpu(monkeypatch, *extra: str) -> list[plan.Check]:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    args = build_parser().parse_args(["device-check", "--full", "--device", "cuda", *extra])
    args.only = []
    return plan.full_plan(args)


@pytest.mark.parametrize("size", [(), ("--small",)])
def test_every_lean_and_first_step_check_for_a_gpu_names_its_dtype(monkeypatch, size):
    checks = _full_plan_on_a_gpu(monkeypatch, *size)
    named = {}
    for check in checks:
        if check.part == "lean":
            game, num_envs, dtype = check.run.args[0], check.run.args[1], check.run.args[5]
            named[(game, num_envs, dtype)] = check.what
            assert dtype in lean.DTYPES and dtype in check.what
        elif check.part == "first-step" and check.run.args[0] == "cartpole":
            assert check.run.args[3]["dtype"] == "float64"
    if not size:  # issue 36's two CartPole targets at 2^20 envs
        assert {("cartpole", 2**20, "float64"), ("cartpole", 2**20, "float32")} <= set(named)


def test_a_lean_env_without_a_dtype_is_refused():
    with pytest.raises(ValueError, match="cartpole lean row needs its dtype named"):
        lean.lean_env("cartpole", 2, "cpu", True, None)
    with pytest.raises(ValueError, match="tag lean row needs its dtype named \\(float32\\)"):
        lean.lean_env("tag", 2, "cpu", True, "float64")


@pytest.mark.parametrize("dtype", lean.DTYPES)
def test_the_lean_row_records_the_dtype_it_ran(dtype):
    plain, _ = lean.lean_throughput("pendulum", 4, "cpu", True, TIMING, dtype)
    assert plain.record["dtype"] == dtype and dtype in plain.setting


def test_parity_and_tag_rows_record_their_dtype():
    assert rows.tag_spec(num_envs=1, steps=1, params=lean.SMALL_TAG).dtype == "float32"
    assert rows.game_spec("pendulum", dtype="float64").dtype == "float64"
    (row,) = rows.tag_scale_throughput("cpu", 1, dict(TIMING, calls_per_repeat=1))
    assert row.record["dtype"] == "float32"
