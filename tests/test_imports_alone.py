"""Every module of the package imports on its own, in a fresh interpreter, as a user's first
``import`` would (an import circle that a suite's earlier imports hide fails here). A module of an
optional extra whose library is not installed must fail with ``ModuleNotFoundError`` naming that
library, nothing else."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from tests.helpers.package_graph import MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_module_imports_alone(module):
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300
    )
    if result.returncode == 0:
        return
    missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", result.stderr)
    if missing and not missing.group(1).startswith("gpu_envs"):
        library = missing.group(1).split(".")[0]
        assert importlib.util.find_spec(library) is None, result.stderr[-3000:]
        pytest.skip(f"{module} needs the optional library {library}")
    pytest.fail(f"python -c 'import {module}' failed:\n{result.stderr[-3000:]}")
