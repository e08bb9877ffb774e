"""The wheelhouse of the GPU run: every wheel the lent GPU machine's image lacks, built here.

The lent GPU machines reach no package index (docs/cuda.md, "The first GPU run"). Their image
holds torch, numba and most of what the project needs (:data:`IMAGE`); ``.ci/device-run`` installs
the rest from a folder beside the checkout with ``pip install --no-index --no-deps``. This builds
that folder: the project as a wheel, every package of its requirements' closure that the image
lacks, and the CUDA launch stack at the versions it was tested with (:data:`PINNED`), so that the
image's cannot drift::

    python -m gpu_envs.device_check.wheelhouse .wheelhouse  # for the image's CPython 3.12
    python -m gpu_envs.device_check.wheelhouse --python-version 3.11 DIR  # CI's rehearsal

The closure (:func:`closure`) starts from the project wheel's ``Requires-Dist``, evaluates each
marker for Linux x86_64 and the target Python, follows the extras asked for, leaves a name of
:data:`IMAGE` to the image unless :data:`PINNED` names it, and downloads any other as one
``manylinux`` wheel (``pip download --no-deps --only-binary=:all:``, one call per level of the
tree), whose own requirements it follows in turn. The folder's ``*.whl`` are replaced; their
total must stay under :data:`LIMIT_MIB` (the device tool carries 64 MiB with the checkout). The
checkout's ``build/`` (setuptools' scratch, whose stale files would ship) is removed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename

#: The Python packages of the lent GPU machines' image ('cuda'; the device tool's KINDS.md, read
#: there on 2026-11-17). Versions unknown: torch is 2.11.0+cu130 and Python 3.12.3.
_IMAGE_NAMES = """
    absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
    botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
    coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
    diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
    frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
    jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
    linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl
    meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
    narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti
    nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
    nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
    nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime
    onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
    orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
    prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
    pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
    pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich
    sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn
    sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
    statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
    tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
    torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions
    typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
"""
IMAGE = frozenset(canonicalize_name(name) for name in _IMAGE_NAMES.split())
#: Carried although the image has them: the CUDA launch path (kernels/cuda.py) at the versions it
#: was written and tested with, inside pyproject.toml's ranges.
PINNED: dict[NormalizedName, str] = {
    canonicalize_name("numba-cuda"): "0.30.4",
    canonicalize_name("cuda-core"): "1.2.2",
    canonicalize_name("cuda-bindings"): "13.5.0",
    canonicalize_name("cuda-pathfinder"): "1.9.1",
}
#: The most the wheels may weigh together (MiB).
LIMIT_MIB = 40
#: The platform tags a wheel may have: manylinux up to glibc 2.28 (torch's own wheels need 2.28).
PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
)

#: The version and ``Requires-Dist`` lines of each package, for the requirements it is fetched for.
Metadata = Callable[[list[Requirement]], list[tuple[str, list[str]]]]


class WheelhouseError(RuntimeError):
    """The wheelhouse cannot be built as asked; the message says why and what to do."""


def environment(python_version: str) -> dict[str, str]:
    """The marker environment of CPython ``python_version`` ("3.12") on Linux x86_64."""
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
    }


def _applying(lines: Iterable[str], env: dict[str, str], extras: set[str]) -> list[Requirement]:
    """The requirements of ``lines`` whose markers hold in ``env`` for one of ``extras`` ("" is
    the package without extras)."""
    found = []
    for line in lines:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None:
            applies = "" in extras
        else:
            applies = any(marker.evaluate({**env, "extra": extra}) for extra in extras)
        if applies:
            found.append(requirement)
    return found


def closure(
    requires: Iterable[str], metadata: Metadata, env: dict[str, str]
) -> dict[NormalizedName, str]:
    """The packages to carry and their versions: every package that ``requires`` needs, directly
    or through another carried one, and :data:`IMAGE` lacks, and those of :data:`PINNED`.

    ``metadata`` gives packages' versions and requirements (downloads, or the installed ones),
    one call per level of the dependency tree. Raises :class:`WheelhouseError` when a pin misses
    a requirement's range."""
    versions: dict[NormalizedName, str] = {}
    requirements: dict[NormalizedName, list[str]] = {}
    followed: dict[NormalizedName, set[str]] = {}  # the extras followed ("": the package itself)
    level = _applying(requires, env, {""})
    while level:
        carried, fetch = [], {}
        for requirement in level:
            name = canonicalize_name(requirement.name)
            pin = PINNED.get(name)
            if pin is not None and not requirement.specifier.contains(pin, prereleases=True):
                raise WheelhouseError(
                    f"{name}=={pin} (PINNED in gpu_envs/device_check/wheelhouse.py) does not "
                    f"satisfy {requirement}: move the pin into that range"
                )
            if name in IMAGE and pin is None:
                continue
            carried.append((name, requirement))
            if name not in versions and name not in fetch:
                spec = f"=={pin}" if pin else str(requirement.specifier)
                fetch[name] = Requirement(f"{name}{spec}")
        for name, found in zip(fetch, metadata(list(fetch.values())) if fetch else []):
            versions[name], requirements[name] = found
            followed[name] = set()
        level = []
        for name, requirement in carried:
            extras = ({""} | set(requirement.extras)) - followed[name]
            followed[name] |= extras
            level += _applying(requirements[name], env, extras)
    return versions


def wheel_metadata(wheel: Path) -> tuple[str, list[str]]:
    """The version and ``Requires-Dist`` lines of ``wheel``."""
    with zipfile.ZipFile(wheel) as archive:
        (path,) = (n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/METADATA"))
        message = Parser().parsestr(archive.read(path).decode())
    return message["Version"], message.get_all("Requires-Dist") or []


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if done.returncode:
        cause = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise WheelhouseError(f"`pip {' '.join(args)}` failed: {cause}")


def _wheel_of(folder: Path, name: str) -> Path:
    """The one wheel of package ``name`` in ``folder``."""
    (wheel,) = (w for w in folder.glob("*.whl") if parse_wheel_filename(w.name)[0] == name)
    return wheel


def downloader(folder: Path, python_version: str) -> Metadata:
    """:data:`Metadata` that downloads the wheels for CPython ``python_version`` on Linux x86_64
    into ``folder``."""
    platforms = [f"--platform={platform}" for platform in PLATFORMS]

    def download(requirements: list[Requirement]) -> list[tuple[str, list[str]]]:
        _pip(
            "download", "--quiet", "--no-deps", "--only-binary=:all:", "--implementation=cp",
            f"--python-version={python_version}", *platforms, f"--dest={folder}",
            *map(str, requirements),
        )  # fmt: skip
        names = [canonicalize_name(requirement.name) for requirement in requirements]
        return [wheel_metadata(_wheel_of(folder, name)) for name in names]

    return download


def build(folder: Path, project: Path, python_version: str) -> list[Path]:
    """Replace the wheels of ``folder`` with the project's and those it needs beyond the image."""
    if not (project / "pyproject.toml").is_file():
        raise WheelhouseError(f"{project} holds no pyproject.toml: give --project the checkout")
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        old.unlink()
    scratch = project / "build"  # setuptools' copies: a module deleted since would ship
    shutil.rmtree(scratch, ignore_errors=True)
    _pip("wheel", "--quiet", "--no-deps", f"--wheel-dir={folder}", str(project))
    shutil.rmtree(scratch, ignore_errors=True)
    _, requires = wheel_metadata(_wheel_of(folder, canonicalize_name("gpu-envs")))
    closure(requires, downloader(folder, python_version), environment(python_version))
    wheels = sorted(folder.glob("*.whl"))
    total = sum(wheel.stat().st_size for wheel in wheels) / 2**20
    if total > LIMIT_MIB:
        raise WheelhouseError(
            f"the wheels in {folder} weigh {total:.1f} MiB, over {LIMIT_MIB} MiB (the GPU run "
            "carries 64 MiB with the checkout): drop a dependency or raise LIMIT_MIB knowingly"
        )
    return wheels


def main(argv: list[str] | None = None) -> int:
    """``python -m gpu_envs.device_check.wheelhouse``: build the wheelhouse, list its wheels."""
    parser = argparse.ArgumentParser(
        prog="python -m gpu_envs.device_check.wheelhouse", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("folder", type=Path, help="the wheelhouse (its *.whl are replaced)")
    parser.add_argument("--python-version", default="3.12", help="target CPython (3.12)")
    parser.add_argument("--project", type=Path, default=Path("."), help="the checkout (.)")
    args = parser.parse_args(argv)
    try:
        wheels = build(args.folder, args.project, args.python_version)
    except WheelhouseError as error:
        print(f"wheelhouse: error: {error}", file=sys.stderr)
        return 1
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:6.1f} MiB  {wheel.name}")
    print(f"{sum(w.stat().st_size for w in wheels) / 2**20:6.1f} MiB  in {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
