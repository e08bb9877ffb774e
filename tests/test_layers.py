"""The layers import only downwards: kernels <- engine and envs <- adapters <- trainers <- commands
and benchmarks (issue 17). The trainers' layer is three packages: ``trainers`` (the learning),
``runs`` (a run's config, folder, checkpoints and logs) and ``lightning`` (Lightning's driver).
A new upward import fails here with the file and the module it imports.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = ("kernels", "envs", "adapters", "trainers", "commands")
ADAPTERS = (
    "sb3_adapter",
    "torchrl_envs",
    "torchrl_joint_actions",
    "supersuit_flow",
    "benchmarl_task",
    "torch_vec_adapters",
    "rsl_rl_adapter",
    "skrl_adapter",
    "rl_games_adapter",
)


def layer_of_module(name: str) -> str | None:
    """The layer of an imported ``gpu_envs`` module (None outside the package)."""
    if name != "gpu_envs" and not name.startswith("gpu_envs."):
        return None
    parts = name.split(".")
    second = parts[1] if len(parts) > 1 else ""
    if second == "kernels":
        return "kernels"
    if second in ("trainers", "runs", "lightning"):
        return "trainers"
    if second in ("commands", "benchmarks", "cli"):
        return "commands"
    return "adapters" if second in ADAPTERS else "envs"


def layer_of_file(path: Path) -> str:
    relative = path.relative_to(ROOT)
    top = relative.parts[0]
    if top in ("kernels", "trainers"):
        return top
    return layer_of_module("gpu_envs." + ".".join(relative.with_suffix("").parts[1:])) or "envs"


def imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text("utf8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            names += [f"{base}.{a.name}" if base == "gpu_envs" else base for a in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def test_no_layer_imports_a_layer_above_it():
    files = [
        *ROOT.joinpath("gpu_envs").rglob("*.py"),
        *ROOT.joinpath("kernels").glob("*.py"),
        *ROOT.joinpath("trainers").glob("*.py"),
    ]
    upward = []
    for path in files:
        own = ORDER.index(layer_of_file(path))
        for name in imported_modules(path):
            layer = layer_of_module(name)
            if layer is not None and ORDER.index(layer) > own:
                upward.append(f"{path.relative_to(ROOT)} imports {name} ({layer})")
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)


def test_the_check_sees_an_upward_import():
    assert layer_of_file(ROOT / "gpu_envs" / "engine.py") == "envs"
    assert layer_of_file(ROOT / "gpu_envs" / "benchmarks" / "tag.py") == "commands"
    assert layer_of_module("gpu_envs.runs.presets") == "trainers"
    assert ORDER.index(layer_of_module("gpu_envs.runs.presets")) > ORDER.index("envs")
