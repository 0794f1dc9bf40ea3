"""The backends wing: what runs a scenario. ``sim`` is the Rust engine (with
algorithms written in Python, ``cca``), ``linux`` this machine's kernel TCP in
network namespaces. Both implement the ``Backend`` protocol (``base``):
a name, their algorithm catalogue, and ``run(scenario, progress) -> RunResult``.
"""
