"""The GPU run's wheelhouse: which wheels it carries beyond the lent GPU machines' image."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gpu_envs.device_check import wheelhouse
from gpu_envs.device_check.wheelhouse import IMAGE, PINNED, WheelhouseError, closure, environment

ROOT = Path(__file__).resolve().parents[2]
#: What the image lacks of the project's runtime closure (gymnasium[classic-control] brings
#: pygame-ce, tbb brings tcmlib); a new dependency changes this list knowingly.
MISSING = {
    "gymnasium", "pettingzoo", "omegaconf", "array-api-compat", "farama-notifications",
    "pygame-ce", "tbb", "tcmlib",
}  # fmt: skip


def installed(requirements: list[Requirement]) -> list[tuple[str, list[str]]]:
    """The metadata of the installed distributions (this venv has every runtime dependency)."""
    found = [importlib.metadata.distribution(r.name) for r in requirements]
    return [(distribution.version, distribution.requires or []) for distribution in found]


def test_every_runtime_dependency_is_in_the_image_or_the_wheelhouse():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    carried = closure(requires, installed, environment("3.12"))
    assert set(carried) == MISSING | set(PINNED)
    for line in requires:
        name = canonicalize_name(Requirement(line).name)
        assert name in IMAGE or name in carried, name
    for name in carried:  # the closure: what a carried wheel needs is carried or in the image
        for line in installed([Requirement(name)])[0][1]:
            dependency = Requirement(line)
            if dependency.marker is None or dependency.marker.evaluate(environment("3.12")):
                assert canonicalize_name(dependency.name) in IMAGE | set(carried), line


def test_new_dependencies_are_carried_with_theirs_by_marker_and_extra():
    packages = {
        "newpkg": ("1.0", ["numpy>=1", "tinydep; extra == 'x'", "win; sys_platform == 'win32'"]),
        "tinydep": ("2.0", ["torch", "py310only; python_version < '3.11'"]),
        "numba-cuda": ("0.30.4", ["numba>=0.60", "cuda-core<2,>=0.5.1"]),
        "cuda-core": ("1.2.2", ["numpy", "cuda-toolkit==13.*; extra == 'cu13'"]),
        "py310only": ("0.1", []),
    }  # fmt: skip
    fetched = []

    def metadata(requirements):
        fetched.append([str(requirement) for requirement in requirements])
        return [packages[requirement.name] for requirement in requirements]

    roots = ["newpkg[x]>=1", "numpy", "sphinx; extra == 'docs'", "numba-cuda>=0.30,<0.31"]
    carried = closure(roots, metadata, environment("3.12"))
    assert carried == {
        "newpkg": "1.0",
        "tinydep": "2.0",
        "numba-cuda": "0.30.4",
        "cuda-core": "1.2.2",
    }
    # one download per level of the tree; the pins, not the latest
    assert fetched == [["newpkg>=1", "numba-cuda==0.30.4"], ["tinydep", "cuda-core==1.2.2"]]
    assert closure(["tinydep"], metadata, environment("3.10")) == {
        "tinydep": "2.0",
        "py310only": "0.1",
    }


def test_a_pin_outside_a_required_range_names_the_pin():
    with pytest.raises(WheelhouseError, match=r"numba-cuda==0\.30\.4 .* numba-cuda>=0\.31"):
        closure(["numba-cuda>=0.31"], installed, environment("3.12"))


def test_the_metadata_of_a_wheel(tmp_path):
    wheel = tmp_path / "demo-1.5-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo/__init__.py", "")
        archive.writestr(
            "demo-1.5.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: demo\nVersion: 1.5\nRequires-Dist: numpy>=1\n"
            "Requires-Dist: rich; extra == 'pretty'\n",
        )
    assert wheelhouse.wheel_metadata(wheel) == ("1.5", ["numpy>=1", "rich; extra == 'pretty'"])


def test_a_folder_without_a_project_is_one_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "gpu_envs.device_check.wheelhouse", str(tmp_path / "wheels"),
         "--project", str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"wheelhouse: error: {tmp_path} holds no pyproject.toml: give --project the checkout"
    )


def test_the_project_wheel_is_built_without_setuptools_stale_copies(tmp_path, monkeypatch):
    """setuptools packs what its build/lib holds: a module deleted from the checkout would ship."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    stale = tmp_path / "build" / "lib" / "gpu_envs" / "deleted_module.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    seen = []

    def pip(*args):
        seen.append((args[0], (tmp_path / "build").exists()))
        raise WheelhouseError("stop here")

    monkeypatch.setattr(wheelhouse, "_pip", pip)
    with pytest.raises(WheelhouseError, match="stop here"):
        wheelhouse.build(tmp_path / "wheels", tmp_path, "3.12")
    assert seen == [("wheel", False)]
