"""The folder's CSV logger (``event_logger.CSVLogger``, no Lightning import) writes the file
Lightning's ``CSVLogger`` writes, version folders included."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lightning.fabric.loggers import CSVLogger as LightningCSVLogger

from gpu_envs.runs.event_logger import CSVLogger

_CALLS = st.lists(
    st.tuples(
        st.dictionaries(
            st.sampled_from(["losses/value", "charts/SPS", "charts/episodic_return", "x"]),
            st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.integers(-5, 5)),
            min_size=1,
        ),
        st.booleans(),  # save after this call
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=30, deadline=None)
@given(calls=_CALLS)
def test_writes_what_lightnings_csv_logger_writes(tmp_path_factory, calls):
    folder = tmp_path_factory.mktemp("csv")
    written = []
    for logger_class in (LightningCSVLogger, CSVLogger):
        logger = logger_class(folder / logger_class.__module__, name="csv")
        for step, (metrics, save) in enumerate(calls):
            logger.log_metrics({**metrics, "t": torch.tensor(step / 4)}, step=100 * step)
            if save:
                logger.save()
        logger.finalize("success")
        written.append(folder / logger_class.__module__ / "csv" / "version_0" / "metrics.csv")
    ours, lightnings = (path.read_text() for path in reversed(written))
    assert ours == lightnings


def test_a_new_logger_beside_old_versions_takes_the_next_one(tmp_path):
    for version in ("version_0", "version_3", "version_x"):
        (tmp_path / "csv" / version).mkdir(parents=True)
    logger = CSVLogger(tmp_path, name="csv")
    assert logger.log_dir == str(tmp_path / "csv" / "version_4")
    assert logger.log_dir == LightningCSVLogger(tmp_path, name="csv").log_dir
