"""A training run's description and records: what the trainers read and write around the learning.

``config`` (the typed run config, its rules and YAML) and ``presets`` (the bundled configs),
``config_docs`` (the field table generated from the schema); while a run trains: ``metrics`` (the
statistics window), ``timing`` (the one speed measure), ``console`` (what is printed),
``experiment`` (the LightZero folder and its loggers), ``checkpoint`` (the file format, written
atomically) and ``run_control`` (status, stop, resume); after it: ``curves`` (curves.png),
``scores`` (a checkpoint's greedy returns, on our envs or gymnasium's) and ``matchups`` (a Tag
checkpoint's teams, played and cross-played).

The learning itself (rollout, PPO, the loop) is ``gpu_envs.trainers``; this package knows no loss.
Importing it imports nothing (``gpu-envs`` parsers read ``config`` without torch).
"""
