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

import difflib

__all__ = [
    "CcarenaError",
    "ScenarioError",
    "UnitError",
    "StoreError",
    "ExecutorError",
    "BackendUnavailable",
    "UsageError",
    "UnknownName",
    "UnknownExperiment",
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


class UnknownName(CcarenaError, LookupError):
    """A name (experiment, metric, run id, ...) that is not there. The message
    lists what is (the first few) and the nearest names (``difflib``): an
    empty table never stands for a typo. ``name``, ``what`` and ``choices``
    keep the parts."""

    def __init__(self, what: str, name: str, choices, hint: str = "", where: str = ""):
        self.what, self.name, self.choices = what, name, list(dict.fromkeys(str(c) for c in choices))
        near = difflib.get_close_matches(str(name), self.choices, n=3, cutoff=0.6)
        shown = ", ".join(self.choices[:12]) + (f", ... ({len(self.choices)} in all)" if len(self.choices) > 12 else "")
        msg = f"no {what} {name!r}" + (f" in {where}" if where else "")
        if near:
            msg += f"; did you mean {' or '.join(repr(n) for n in near)}?"
        msg += f" (present: {shown or 'none'})"
        if hint:
            msg += f"; {hint}"
        super().__init__(msg)

    def __str__(self) -> str:  # LookupError's would quote the message like a key
        return str(self.args[0])


class UnknownExperiment(UnknownName, StoreError):
    """An experiment that is not in the results directory (a ``StoreError``, as it always was)."""
