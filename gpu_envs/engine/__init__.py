"""The engine under every game: the batched kernel env (``kernel_env``), input checks
(``validation``), devices and dtypes (``devices``), the single-env face (``single``), what the
classic-control games share (``classic_control``), frames (``rendering``) and CUDA-graph helpers
(``cuda_graphs``). It imports only :mod:`gpu_envs.kernels`."""
