"""docs/tutorial-fabric-ppo.md says what ``gpu-envs train`` offers and prints: its flags table holds
every flag of ``gpu-envs train --help``, every bundled preset and every game's id, and the output
it shows has the form of the lines a run prints now (checked on a short run in a fresh process)."""

import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorial-fabric-ppo.md"
#: A number as the console writes it: -0.008054, 99,840, 8.141e-05, 0..99 (a range of seeds).
NUMBER = r"-?\d[\d.,]*(?:e[-+]\d+)?"


def section(title: str) -> str:
    sections = re.split(r"^## ", PAGE.read_text("utf8"), flags=re.M)
    (body,) = [s for s in sections if s.splitlines()[0].strip() == title]
    return body


def gpu_envs(*args: str, cwd: Path | None = None) -> str:
    """``gpu-envs ARGS`` in a fresh process; what it printed (stdout and stderr)."""
    result = subprocess.run(
        [sys.executable, "-m", "gpu_envs.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_flags_table_lists_every_flag_preset_and_game():
    from gpu_envs.games import GAMES

    table = section("Flags and overrides")
    help_text = gpu_envs("train", "--help")
    usage = help_text.split("\n\n", 1)[0]  # the usage lines, not the description
    flags = set(re.findall(r"--[a-z][\w-]*", usage)) - {"--help"}
    assert {"--devices", "--print-config"} <= flags
    missing = sorted(flag for flag in flags if f"`{flag}" not in table)
    assert not missing, f"flags of `gpu-envs train --help` missing from the table: {missing}"
    presets = re.search(r"bundled config: (.*?) \(or use", help_text, flags=re.S).group(1)
    preset_row = next(line for line in table.splitlines() if line.startswith("| `PRESET`"))
    for name in re.split(r",\s*", " ".join(presets.split())):
        assert f"`{name}`" in preset_row, f"preset {name} missing from the table"
    for game in GAMES.values():
        assert f"`{game.env_id.split('/', 1)[1]}`" in preset_row, f"{game.env_id} missing"


def line_pattern(shown: str) -> re.Pattern:
    """A printed line of the page as a pattern: its numbers any numbers, its paths any path."""
    parts = re.split(rf"(\S*/\S*|{NUMBER})", shown)
    pattern = "".join(
        re.escape(part)
        if i % 2 == 0
        else (r"\S+" if "/" in part and not re.fullmatch(NUMBER, part) else NUMBER)
        for i, part in enumerate(parts)
    )
    return re.compile(pattern)


def test_the_output_shown_has_the_form_of_what_a_run_prints(tmp_path):
    """A short ``gpu-envs train cartpole`` (stopping at its first evaluation, a low stop value):
    each line the page shows (but its ``...``) matches the start of a line the run printed."""
    (shown,) = re.findall(r"^```text\n(.*?)^```", section("Reading the output"), re.M | re.S)
    printed = gpu_envs(
        "train",
        "cartpole",
        "evaluation.stop_value=5",
        "evaluation.num_episodes=4",
        f"saving.basedir={tmp_path}",
        cwd=tmp_path,
    ).splitlines()
    for line in shown.splitlines():
        if line == "...":
            continue
        pattern = line_pattern(line)
        assert any(pattern.match(out) for out in printed), (
            f"the page shows\n{line}\nbut the run printed no such line:\n" + "\n".join(printed)
        )
