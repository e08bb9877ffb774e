"""Sphinx configuration of the gpu-envs documentation site.

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST); the API reference is generated from the docstrings by autodoc, with
napoleon reading Google-style sections (Args, Returns, Raises).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from gpu_envs.benchmarks.plots import write_docs_figures

DOCS = Path(__file__).resolve().parent

# The benchmark pages' charts, drawn from the committed JSON in docs/results/ on every build (so
# they always match it; docs/_plots/ is not committed).
write_docs_figures(DOCS / "results", DOCS / "_plots")

# autodoc imports the installed package (``pip install -e ".[docs]"``): ``kernels/`` and
# ``trainers/`` only exist as ``gpu_envs.kernels`` / ``gpu_envs.trainers`` once installed.
project = "gpu-envs"
author = "gpu-envs authors"
copyright = "2026, gpu-envs authors"
release = importlib.metadata.version("gpu-envs")

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store"]

# MyST: anchors for headings (links like page.md#section), fenced directives, definition lists.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# autodoc: members in source order, signatures with their annotations in the description.
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "description"
autodoc_class_signature = "separated"
autodoc_preserve_defaults = True
# Inherited docstrings (gymnasium, torch, SB3, TorchRL) use their own markup: document ours only.
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# The optional extras (sb3, torchrl, train) are mocked where they are not installed, so the site
# builds from ``pip install -e ".[docs]"`` alone; installed, the real modules are documented.
_OPTIONAL = (
    "stable_baselines3",
    "torchrl",
    "tensordict",
    "lightning",
    "tensorboard",
    "rsl_rl",
    "skrl",
    "rl_games",
)
autodoc_mock_imports = [name for name in _OPTIONAL if importlib.util.find_spec(name) is None]

# Type hints that name third-party classes the site does not link to: resolving them is not our job.
nitpicky = False

html_theme = "furo"
html_title = "gpu-envs"
html_static_path = ["_static"] if (DOCS / "_static").is_dir() else []
