"""Throughput benchmarks behind ``gpu-envs bench GAME``: one module per game, shared machinery.

Each game module's docstring starts with its help line and defines ``add_arguments(parser)`` and
``run(args)``. They share :mod:`gpu_envs.benchmarks.timing` (the measurement protocol and its
:class:`~gpu_envs.benchmarks.timing.Runner`), :mod:`gpu_envs.benchmarks.machine` (machine info and
background load) and :mod:`gpu_envs.benchmarks.report` (tables and JSON).
"""
