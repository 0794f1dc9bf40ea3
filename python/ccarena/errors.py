"""The errors ccarena reports to its user, under one base class.

``CcarenaError`` is what bad input or an unusable environment raises: an
invalid scenario, a quantity without a unit, a results directory that cannot
be used, an executor or a backend that cannot start here, a bad command-line
value. Catch it to handle "anything the user can fix"; the CLI prints it as
one line and exits with status 2. Programming errors (a wrong type passed to
an API function) stay ``TypeError``/``ValueError`` and are not ccarena errors.

Each class also derives from the built-in exception it has always been
(``ValueError`` for invalid input, ``RuntimeError`` for the environment), so
``except ValueError`` in existing code keeps working.
"""

from __future__ import annotations

__all__ = [
    "CcarenaError",
    "ScenarioError",
    "UnitError",
    "StoreError",
    "ExecutorError",
    "BackendUnavailable",
    "UsageError",
]


class CcarenaError(Exception):
    """Base class of every error ccarena reports to its user."""


class ScenarioError(CcarenaError, ValueError):
    """An invalid scenario. ``field`` is the dotted path of the offending field
    (``flows[1].rtt``), ``message`` what is wrong and what is allowed."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        text = f"{field}: {message}" if field else message
        # One line whatever the input held: control characters are shown escaped.
        super().__init__("".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text))


class UnitError(CcarenaError, ValueError):
    """A value that is not a valid quantity (callers add the field's name)."""


class StoreError(CcarenaError, RuntimeError):
    """The results directory cannot be used (missing, locked by a running sweep, newer schema)."""


class ExecutorError(CcarenaError, RuntimeError):
    """The executor cannot start (e.g. no Dask scheduler at the address given)."""


class BackendUnavailable(CcarenaError, RuntimeError):
    """A backend cannot run on this machine (no root, no namespaces, missing tools)."""


class UsageError(CcarenaError):
    """Bad command-line input that the CLI detects itself."""
