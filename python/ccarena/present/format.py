"""Numbers as the CLI tables and the HTML report show them: one rule for a
mean with its confidence interval (``pm``), one for a table cell (``cell``),
and the file-name form of an experiment id (``slug``)."""

from __future__ import annotations

import html
import math
import numbers
from typing import Any

from ..scenario.checks import file_name

__all__ = ["pm", "cell", "slug"]


def pm(mu: Any, ci: Any, decimals: int | None = None, sign: str = " ±") -> str:
    """'0.774 ±0.061': a mean and its CI half-width with the same number of
    decimals (by default 0 from 100 on, 1 from 10 on, else 3); "-" without a
    mean, no interval when it is NaN. `sign` separates them (the report
    writes " &plusmn; ")."""
    try:
        mu, ci = float(mu), float(ci)
    except (TypeError, ValueError):
        return "-"
    if math.isnan(mu):
        return "-"
    a = abs(mu)
    d = decimals if decimals is not None else 0 if a >= 100 else 1 if a >= 10 else 3
    return f"{mu:,.{d}f}" + (f"{sign}{ci:,.{d}f}" if not math.isnan(ci) else "")


def cell(v: Any, digits: int = 3) -> str:
    """A value in an HTML table: numbers to a precision that suits their size
    ("-" for None and NaN), anything else escaped."""
    if v is None:
        return "-"
    if isinstance(v, numbers.Real) and not isinstance(v, bool):  # numpy's numbers too
        v = float(v)
        if math.isnan(v):
            return "-"
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 10:
            return f"{v:.1f}"
        if a >= 1e-3 or v == 0:
            return f"{v:.{digits}f}"
        return f"{v:.2e}"
    return html.escape(str(v))


def slug(text: str) -> str:
    """`text` as a file or directory name (one safe path component)."""
    return file_name(text, "experiment")
