"""``python -m gpu_envs.benchmarks.plots``: bench JSON in, PNG chart out."""

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from gpu_envs.benchmarks import plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def cartpole_document():
    """The shape `gpu-envs bench cartpole --json` writes, with skipped and first-step records."""
    return {
        "benchmark": "cartpole",
        "records": [
            {
                "kind": "throughput",
                "impl": "gpu_envs_cpu",
                "label": "gpu_envs cpu",
                "num_envs": 256,
                "env_steps_per_s": 4.0e7,
                "env_steps_per_s_min": 3.0e7,
                "env_steps_per_s_max": 5.0e7,
            },
            {
                "kind": "throughput",
                "impl": "gym_sync",
                "label": "gymnasium SyncVectorEnv",
                "num_envs": 1,
                "env_steps_per_s": 4.0e4,
                "env_steps_per_s_min": 3.9e4,
                "env_steps_per_s_max": 4.1e4,
            },
            {
                "kind": "throughput",
                "impl": "gpu_envs_cpu",
                "label": "gpu_envs cpu",
                "num_envs": 1,
                "env_steps_per_s": 6.0e5,
                "env_steps_per_s_min": 5.0e5,
                "env_steps_per_s_max": 7.0e5,
            },
            {
                "kind": "skipped",
                "impl": "gym_sync",
                "label": "gymnasium SyncVectorEnv",
                "num_envs": 256,
                "reason": "Python loop over envs",
            },
            {"kind": "first_step", "device": "cpu", "run": 0, "num_envs": 1, "first_step_s": 0.9},
        ],
    }


def tag_document():
    """The shape `gpu-envs bench tag --json` writes (no "kind"; failures carry "error")."""
    return {
        "machine": {},
        "records": [
            {
                "impl": "ours",
                "label": "gpu-envs TagEnv",
                "num_envs": 16,
                "env_steps_per_s": 441.0,
                "agent_steps_per_s": 46300.0,
            },
            {
                "impl": "vmas",
                "label": "VMAS simple_tag",
                "num_envs": 16,
                "error": "ImportError: no vmas",
            },
        ],
    }


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    return struct.unpack(">II", data[16:24])  # IHDR width, height


def test_series_group_by_impl_sorted_by_num_envs_without_skipped_or_first_step_records():
    series = plots.collect_series(plots.records_of(cartpole_document()))
    assert [(s.impl, s.ours) for s in series] == [("gpu_envs_cpu", True), ("gym_sync", False)]
    ours, gym = series
    assert ours.num_envs == [1, 256] and ours.values == [6.0e5, 4.0e7]
    assert ours.lows == [5.0e5, 3.0e7] and ours.highs == [7.0e5, 5.0e7]
    assert gym.num_envs == [1] and gym.values == [4.0e4]


def test_tag_records_failures_are_left_out_and_agent_steps_can_be_chosen():
    (series,) = plots.collect_series(plots.records_of(tag_document()), "agent_steps_per_s")
    assert (series.impl, series.values, series.lows, series.highs) == (
        "ours",
        [46300.0],
        [46300.0],
        [46300.0],
    )


def test_a_bare_record_list_is_accepted():
    records = cartpole_document()["records"]
    assert plots.records_of(records) is records


@pytest.mark.parametrize(
    "document, message",
    [
        ({"records": [{"kind": "skipped", "impl": "x", "num_envs": 1}]}, "no record to plot"),
        ({"results": []}, "'records' list"),
        (
            {"records": [{"impl": "a", "num_envs": 4, "env_steps_per_s": 1.0}] * 2},
            "two records for num_envs=4",
        ),
    ],
)
def test_unusable_input_raises_naming_the_problem(document, message):
    with pytest.raises(ValueError, match=message):
        plots.collect_series(plots.records_of(document))


def test_unknown_metric_is_refused():
    with pytest.raises(ValueError, match="unknown metric 'steps'"):
        plots.collect_series(cartpole_document()["records"], "steps")


def test_command_writes_a_line_chart_png(tmp_path):
    source, out = tmp_path / "cartpole.json", tmp_path / "plots" / "cartpole.png"
    source.write_text(json.dumps(cartpole_document()))
    result = subprocess.run(
        [sys.executable, "-m", "gpu_envs.benchmarks.plots", str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    assert png_size(out) == (800, 480)


def test_single_batch_size_gives_a_bar_chart(tmp_path):
    out = plots.plot(
        plots.collect_series(tag_document()["records"]), tmp_path / "tag.png", title="Tag"
    )
    assert png_size(out) == (800, 480)


def test_command_rejects_a_file_without_records(tmp_path):
    source = tmp_path / "other.json"
    source.write_text(json.dumps({"bench": "sb3_ppo_cartpole", "runs": []}))
    result = subprocess.run(
        [sys.executable, "-m", "gpu_envs.benchmarks.plots", str(source), str(tmp_path / "x.png")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2 and "'records' list" in result.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_jsonl_file_of_records_is_read(tmp_path):
    source = tmp_path / "peer.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in cartpole_document()["records"]))
    assert plots.read_records(source) == cartpole_document()["records"]


def test_the_docs_charts_are_drawn_from_the_committed_json(tmp_path):
    written = plots.write_docs_figures(DOCS / "results", tmp_path)
    assert [p.name for p in written] == [figure.png for figure in plots.DOCS_FIGURES]
    assert all(png_size(path) == (800, 480) for path in written)


def test_the_docs_build_draws_every_chart_the_pages_show():
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    assert 'write_docs_figures(DOCS / "results", DOCS / "_plots")' in conf
    shown = {
        name
        for page in DOCS.glob("*.md")
        for name in re.findall(r"\]\(_plots/([\w.-]+\.png)\)", page.read_text(encoding="utf-8"))
    }
    assert shown == {figure.png for figure in plots.DOCS_FIGURES}
