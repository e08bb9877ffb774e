"""The documentation site builds with warnings as errors (the CI command, into a temporary
folder)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")
pytest.importorskip("furo")

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_docs_build_without_warnings(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    for page in (
        "index",
        "installation",
        "quickstart",
        "tutorial-tag-lightning",
        "tutorial-fabric-ppo",
        "experiment-folder",
        "checkpoints",
        "adapters",
        "spec-cartpole",
        "spec-tag",
        "api",
        "benchmarks",
    ):
        assert (tmp_path / "html" / f"{page}.html").is_file(), page
    api = (tmp_path / "html" / "api.html").read_text(encoding="utf8")
    for name in (
        "gpu_envs.cartpole.CartPoleVectorEnv",
        "gpu_envs.tag.TagEnv",
        "gpu_envs.kernels.rng.uniform01",
        "gpu_envs.trainers.config.RunConfig",
        "gpu_envs.benchmarks.plots.collect_series",
    ):
        assert f'id="{name}"' in api, f"{name} missing from the API reference"
