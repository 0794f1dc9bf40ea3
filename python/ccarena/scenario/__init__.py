"""The scenario wing: a scenario document (TOML or dict) checked and resolved
into the engine's input, in engine units, plus the metadata Python keeps beside
it (flow groups, background set-up, Python algorithms, linux-backend options).

Errors name the field (``ScenarioError``). Nothing here runs anything: which
algorithms are allowed comes from the backend that will run the scenario
(a ``Catalogue``), so this wing imports no backend. The shipped scenarios
(``presets/``) and traces (``traces/``) are data folders of this wing.

The names below keep ``from ccarena.scenario import Scenario, ScenarioError``
working as it did when this wing was one module.
"""

from ..errors import ScenarioError
from .catalogue import Catalogue, cca_catalogue
from .document import apply_overrides, dump_toml, parse_override
from .model import Meta, Scenario

__all__ = ["Scenario", "Meta", "ScenarioError", "Catalogue", "cca_catalogue", "apply_overrides", "parse_override", "dump_toml"]
