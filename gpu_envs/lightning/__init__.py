"""Lightning's ``Trainer`` as a driver of the training core, and the WarpDrive notebook's names.

``module``: ``TagLightningModule`` (one ``TrainingRun.iterate`` per Lightning epoch; trains bit for
bit as ``gpu-envs train``), ``EnvResetCallback`` and the notebook's episode helpers.
``warpdrive``: everything that exists only for WarpDrive's users (the ``defaults: warpdrive``
config mode, ``CUDACallback``, ``PerfStatsCallback``); delete it and the rest still stands.
"""
