"""Runs the Python blocks of one section of docs/using-with-marl.md, as a reader would."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "using-with-marl.md"


def section_blocks(title: str) -> list[tuple[str, str | None]]:
    """The ```python blocks of the ``## title`` section, each with the ```text block right after
    it (what it prints) or None."""
    sections = re.split(r"^## ", PAGE.read_text("utf8"), flags=re.M)
    (body,) = [s for s in sections if s.splitlines()[0].strip() == title]
    pattern = r"^```python\n(.*?)^```\n(?:\n```text\n(.*?)^```\n)?"
    found = re.findall(pattern, body, flags=re.M | re.S)
    return [(code, printed or None) for code, printed in found]


def run_block(code: str, namespace: dict, name: str) -> str:
    """Execute ``code`` in ``namespace``; what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"{PAGE.name}: {name}", "exec"), namespace)
    return printed.getvalue()
