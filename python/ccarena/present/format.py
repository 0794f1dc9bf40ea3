"""Numbers as the CLI tables and the HTML report show them: one rule for a
mean with its confidence interval (``pm``), one for a table cell (``cell``),
and the file-name form of an experiment id (``slug``)."""

from __future__ import annotations

import html
import math
import numbers
from typing import Any

from ..scenario.checks import file_name

__all__ = ["pm", "cell", "slug", "ci_decimals"]


def ci_decimals(ci: float) -> int | None:
    """Decimals a mean with this CI half-width supports: those of the
    half-width's two leading significant digits (0.061 -> 3, 1.4 -> 1,
    23 -> 0); None without a usable interval."""
    if not math.isfinite(ci) or ci <= 0:
        return None
    return max(0, 1 - math.floor(math.log10(ci)))


def pm(mu: Any, ci: Any, decimals: int | None = None, sign: str = " ±", low: Any = None, high: Any = None) -> str:
    """'0.774 ±0.061': a mean and its CI half-width, both to the decimals the
    interval supports (``ci_decimals``; without an interval, 0 from 100 on, 1
    from 10 on, else 3); "-" without a mean. When `low`/`high` are given and
    the interval was cut at the metric's bound (docs/metrics.md) it is shown
    as its ends: '0.995 [0.93, 1.00]'. `sign` separates mean and half-width
    (the report writes " &plusmn; ")."""
    try:
        mu, ci = float(mu), float(ci)
    except (TypeError, ValueError):
        return "-"
    if math.isnan(mu):
        return "-"
    a = abs(mu)
    d = decimals if decimals is not None else ci_decimals(ci)
    if d is None:
        d = 0 if a >= 100 else 1 if a >= 10 else 3
    try:
        lo, hi = float(low), float(high)
    except (TypeError, ValueError):
        lo = hi = float("nan")
    if not math.isnan(ci) and math.isfinite(lo) and math.isfinite(hi) and (lo > mu - ci * (1 - 1e-9) or hi < mu + ci * (1 - 1e-9)):
        return f"{mu:,.{d}f} [{lo:,.{d}f}, {hi:,.{d}f}]"
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
