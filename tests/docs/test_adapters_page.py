"""docs/adapters.md's TorchRL block runs as written on the machine at hand: it picks the device
(a GPU where there is one, else the CPU) instead of naming CUDA."""

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("torchrl")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def section_code(title: str) -> str:
    """The ```python blocks of the ``## title`` section, joined."""
    sections = re.split(r"^## ", PAGE.read_text("utf8"), flags=re.M)
    (body,) = [s for s in sections if s.splitlines()[0].strip() == title]
    return "\n".join(re.findall(r"^```python\n(.*?)^```", body, flags=re.M | re.S))


def test_torchrl_block_runs_on_the_device_this_machine_has():
    import torch

    from gpu_envs.engine import devices

    namespace: dict = {"__name__": "__adapters_page__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(section_code("TorchRL"), f"{PAGE.name}: TorchRL", "exec"), namespace)
    expected = devices.resolve_device("auto")
    assert printed.getvalue().split() == [str(torch.device(expected))]
    assert namespace["rollout"]["next", "reward"].shape == (256, 100, 1)
    assert namespace["td"]["runner", "observation"].shape == (16, 100, 71)
    assert namespace["pendulum"].device == namespace["env"].device == namespace["tag"].device
