"""``device-check``'s record of a run: the rows as they come, on the console and in the JSON file.

The JSON file is rewritten whole after every check (written to a temporary file beside it, then
``os.replace``): at any moment it holds every row measured so far, so a run stopped by a timeout
loses nothing it measured. ``"finished": false`` marks a run that did not get to its end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from typing import Any

from gpu_envs.benchmarks import report
from gpu_envs.device_check.rows import Row

FAIL_EXIT = 1


class Journal:
    """Collects the rows of a run; writes the JSON document to ``path`` (None: nowhere; '-':
    stdout, once, at :meth:`finish`) after each :meth:`add`."""

    def __init__(self, path: str | None, header: dict[str, Any]):
        self.path, self.header = path, header
        self.rows: list[Row] = []
        self.checks: list[dict[str, Any]] = []
        self.start = time.perf_counter()
        self.finished = False
        self.targets: list[dict] = []
        self._write()

    def add(self, rows: list[Row], check: dict[str, Any]) -> None:
        """Keep ``rows`` (one check's, ``check`` describing it), print them, rewrite the file."""
        for row in rows:
            self.rows.append(row)
            targets = "".join(f" [{t['target']} {t['bound']}: {t['status']}]" for t in row.targets)
            print(
                f"  {row.check}: {row.setting}: {row.result} {row.status}{targets}",
                file=sys.stderr,
                flush=True,
            )
        self.checks.append(check)
        self._write()

    def finish(self, targets: list[dict]) -> None:
        """The run got to its end; ``targets``: the targets' summary."""
        self.finished, self.targets = True, targets
        self._write(final=True)

    def document(self) -> dict[str, Any]:
        """The JSON document of the run so far."""
        return {
            **self.header,
            "finished": self.finished,
            "elapsed_s": time.perf_counter() - self.start,
            "checks": self.checks,
            "targets": self.targets,
            "rows": [dataclasses.asdict(r) for r in self.rows],
        }

    def _write(self, final: bool = False) -> None:
        if self.path is None or (self.path == "-" and not final):
            return
        if self.path == "-":
            report.write_json(self.document(), "-")
            return
        write_atomically(self.path, json.dumps(self.document(), indent=1, default=str) + "\n")


def write_atomically(path: str, text: str) -> None:
    """Replace ``path``'s content with ``text`` in one step: a reader sees the old file or the
    new one, never a part."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".device-check-", suffix=".json")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)  # (mkstemp makes it private)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def format_table(rows: list[Row]) -> str:
    """All rows as one Markdown table (the target column: each target, bound and verdict)."""
    return report.markdown_table(
        ["check", "setting", "result", "status", "target"],
        [
            [
                r.check,
                r.setting,
                r.result,
                r.status,
                "; ".join(f"{t['target']} {t['bound']}: {t['status']}" for t in r.targets),
            ]
            for r in rows
        ],
    )


def format_targets(targets: list[dict]) -> str:
    """The targets' summary as a Markdown table."""
    return report.markdown_table(
        ["GPU target", "bound", "verdict", "rows"],
        [[t["target"], t["bound"], t["status"], str(len(t["rows"]))] for t in targets],
    )


def exit_status(rows: list[Row]) -> int:
    """1 when a check failed, else 0."""
    return FAIL_EXIT if any(r.status == "FAIL" for r in rows) else 0
