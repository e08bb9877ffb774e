"""The folders are the layers (docs/architecture.md): each imports only from the layers below it,
and no module imports itself back through others, at module level or inside a function
(imports under ``if TYPE_CHECKING:`` aside). The layer of a module is the folder it sits in; a new
folder fails here until it is given its place in ``LAYERS``.
"""

from __future__ import annotations

import pytest

from tests.helpers.package_graph import GRAPH, ROOT, find_cycles, imports_of

#: Bottom to top; folders on one line are one layer. The package's folders are what is checked.
LAYERS = (
    ("kernels",),
    ("engine",),
    ("games",),
    ("adapters",),
    ("runs",),
    ("trainers",),
    ("lightning",),
    ("commands", "benchmarks", "device_check"),
)
#: The modules at the top of ``gpu_envs/`` and the layer each belongs to.
TOP_MODULES = {"__init__": "games", "tag_v0": "games", "cli": "commands"}


def layer_of(name: str) -> int:
    """The index in ``LAYERS`` of module ``name``'s layer (KeyError for an unplaced folder)."""
    parts = name.split(".")
    if len(parts) == 1:
        return _index(TOP_MODULES["__init__"])
    return _index(TOP_MODULES.get(parts[1], parts[1]) if len(parts) == 2 else parts[1])


def _index(folder: str) -> int:
    for index, layer in enumerate(LAYERS):
        if folder in layer:
            return index
    raise KeyError(f"gpu_envs/{folder}/ is in no layer of LAYERS: give it its place")


def test_no_import_cycle():
    cycles = find_cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_layer_imports_a_layer_above_it():
    upward = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(name)
    ]
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)


def test_every_folder_is_a_layer_and_the_top_stays_small():
    folders = {p.name for p in (ROOT / "gpu_envs").iterdir() if (p / "__init__.py").exists()}
    for folder in folders | {"kernels", "trainers"}:
        _index(folder)
    top = {p.stem for p in (ROOT / "gpu_envs").glob("*.py")}
    assert top == set(TOP_MODULES), f"modules at the top of gpu_envs/: {sorted(top)}"
    assert len(top) <= 6


def test_the_checks_see_a_cycle_and_an_upward_import():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("gpu_envs.runs.config") < layer_of("gpu_envs.trainers.core")
    assert layer_of("gpu_envs.kernels.cpu") < layer_of("gpu_envs.engine.kernel_env")
    assert layer_of("gpu_envs.tag_v0") == layer_of("gpu_envs.games.tag.env")
    assert layer_of("gpu_envs.cli") == layer_of("gpu_envs.benchmarks.report")
    with pytest.raises(KeyError, match="gpu_envs/utils/ is in no layer"):
        layer_of("gpu_envs.utils.anything")
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gpu_envs.cli\n"
    assert imports_of("gpu_envs.runs.x", source) == set()
    assert imports_of("gpu_envs.runs.x", "def f():\n    import gpu_envs.cli\n") == {"gpu_envs.cli"}
