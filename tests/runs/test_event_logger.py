"""One TensorBoard event per ``log_metrics`` call reads back exactly as Lightning's logger's."""

import pytest
import torch
from lightning.fabric.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from gpu_envs.runs.event_logger import OneEventTensorBoardLogger


def _scalars(folder) -> dict:
    events = EventAccumulator(str(folder))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


@pytest.mark.parametrize("prefix", ["", "train"])
def test_reads_back_as_lightnings_logger(tmp_path, prefix):
    written = {}
    for logger_class in (TensorBoardLogger, OneEventTensorBoardLogger):
        logger = logger_class(tmp_path, name=logger_class.__name__, version="", prefix=prefix)
        for step in range(5):
            logger.log_metrics(
                {"losses/value": 0.25 * step, "charts/SPS": 1000 + step, "t": torch.tensor(step)},
                step=10 * step,
            )
        logger.finalize("success")
        written[logger_class] = _scalars(tmp_path / logger_class.__name__)
    ours, lightnings = written[OneEventTensorBoardLogger], written[TensorBoardLogger]
    assert len(ours) == 3 and ours == lightnings


def test_a_value_that_is_not_a_number_is_named(tmp_path):
    logger = OneEventTensorBoardLogger(tmp_path, name="x")
    with pytest.raises(ValueError, match="'losses/bad'.*not a number"):
        logger.log_metrics({"losses/bad": "high"}, step=0)
