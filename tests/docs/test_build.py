"""The documentation site builds with warnings as errors (the CI command, into a temporary
folder)."""

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")
pytest.importorskip("furo")

DOCS = Path(__file__).resolve().parents[2] / "docs"


def public_members() -> list[str]:
    """``module.name`` of every public class and function the package defines (not re-exports),
    in every module but the ``__main__`` entry points and those whose optional extra is missing."""
    import gpu_envs

    names = []
    for info in pkgutil.walk_packages(gpu_envs.__path__, "gpu_envs."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an adapter of an optional extra that is not installed
            continue
        for name, member in vars(module).items():
            defined_here = getattr(member, "__module__", None) == info.name
            is_api = inspect.isclass(member) or inspect.isfunction(member)
            if is_api and defined_here and not name.startswith("_"):
                names.append(f"{info.name}.{name}")
    return names


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
        "gpu_envs.games.cartpole.CartPoleVectorEnv",
        "gpu_envs.games.tag.env.TagEnv",
        "gpu_envs.kernels.rng.uniform01",
        "gpu_envs.runs.config.RunConfig",
        "gpu_envs.benchmarks.plots.collect_series",
    ):
        assert f'id="{name}"' in api, f"{name} missing from the API reference"
    missing = [name for name in public_members() if f'id="{name}"' not in api]
    assert not missing, f"public members missing from docs/api.md: {missing}"
