"""The experiments wing: sweeps (a scenario's grid of runs), the executors
that run them (local processes, Dask), the runner that stores each run as it
finishes, the simulator-vs-kernel cross-check, the benchmark, and the
catalogue of shipped experiments.
"""
