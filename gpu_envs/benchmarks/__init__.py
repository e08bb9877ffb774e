"""Throughput benchmarks behind ``gpu-envs bench GAME``: one module per game, one shared timing protocol.

Each game module's docstring starts with its help line and defines ``add_arguments(parser)`` and
``run(args)``; :mod:`gpu_envs.benchmarks.timing` holds the measurement protocol they share.
"""
