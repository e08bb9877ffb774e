"""The GPU targets per machine kind: issue 36's figures are an H200's; on an H100 (less HBM
bandwidth) the bandwidth-bound CartPole targets scale down, the host's targets stay, and the run
judges its rows by the kind its device name says."""

import json

import pytest

from gpu_envs.cli import main
from gpu_envs.device_check import plan, rows, runner, targets

ROW_AT_2_20 = {"game": "cartpole", "num_envs": 2**20, "dtype": "float64"}


@pytest.mark.parametrize(
    ("name", "kind", "hbm"),
    [
        ("NVIDIA H100 80GB HBM3", "H100", 3.35),
        ("NVIDIA H100 NVL", "H100 NVL", 3.9),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2.0),
        ("NVIDIA H200", "H200", 4.8),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB (judged by H200 figures)", 4.8),
    ],
)
def test_the_kind_comes_from_the_device_name(name, kind, hbm):
    assert (targets.machine_kind(name).name, targets.machine_kind(name).hbm_tb_s) == (kind, hbm)


def test_bandwidth_bound_targets_scale_with_the_kind_and_host_targets_stay():
    h100, h200 = targets.gpu_targets(targets.H100), targets.gpu_targets(targets.H200)
    assert [t.bound for t in h200] == [t.bound for t in targets.GPU_TARGETS]
    assert [t.bound for t in h100[:2]] == pytest.approx([20e9 * 3.35 / 4.8, 30e9 * 3.35 / 4.8])
    assert [t.bound for t in h100[2:]] == [t.bound for t in h200[2:]] == [10.0, 2.0]
    row = rows.Row("cartpole lean step", "", "", record={**ROW_AT_2_20, "env_steps_per_s": 16e9})
    assert targets.mark(row, True, h100).targets[0]["status"] == targets.MET
    row.targets = []
    assert targets.mark(row, True, h200).targets[0]["status"] == targets.NOT_MET


def test_a_run_on_an_h100_judges_its_rows_by_h100_figures(monkeypatch, tmp_path, capsys):
    path = tmp_path / "rows.json"
    record = {**ROW_AT_2_20, "env_steps_per_s": 16e9}
    lean_row = plan.Check("lean", "l", lambda: [rows.Row("cartpole lean step", "", "", "", record)])
    monkeypatch.setattr(runner, "_device_name", lambda args: ("NVIDIA H100 80GB HBM3", True))
    monkeypatch.setattr(runner, "full_plan", lambda args: [lean_row])
    assert main(["device-check", "--full", "--json", str(path)]) == 0
    assert "plan (estimated seconds on one H100" in capsys.readouterr().out
    document = json.loads(path.read_text())
    assert document["machine_kind"] == "H100"
    (float64,) = [t for t in document["targets"] if t["target"] == "CartPole float64, 2^20 envs"]
    assert (float64["bound"], float64["status"]) == (">= 14G env-steps/s", targets.MET)
