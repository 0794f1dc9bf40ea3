"""The scenario wing: a scenario document (TOML or dict) checked and resolved
into the engine's input, in engine units, plus the metadata Python keeps beside
it (flow groups, background set-up, Python algorithms, linux-backend options).

Errors name the field (``ScenarioError``). Nothing here runs anything: which
algorithms are allowed comes from the backend that will run the scenario
(a ``Catalogue``), so this wing imports no backend. The shipped scenarios
(``presets/``) and traces (``traces/``) are data folders of this wing.
"""
