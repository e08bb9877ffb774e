"""The device check behind ``gpu-envs device-check``: CPU-vs-CUDA parity and CUDA throughput.

:mod:`~gpu_envs.device_check.plan` picks the checks, :mod:`~gpu_envs.device_check.runner` runs
them and :mod:`~gpu_envs.device_check.journal` records their rows;
:mod:`~gpu_envs.device_check.targets` judges the rows against the GPU targets.
"""
