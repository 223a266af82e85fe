"""Ratios written with no more digits than their spread allows.

A timing is a median with p20/p80 (``tcourse.bench.Timing`` or its ``asdict``); a comparison of two
timings (``Comparison.as_dict()``) carries both. Its relative spread is the mean of the two
(p80 - p20) / median widths; a ratio is printed with 2 or 3 significant figures, the last digit no
finer than half that spread. Chapters, README and TUTORIAL use the same rule (scripts/sync_numbers.py).
"""
from __future__ import annotations

import math


def _width(t) -> float | None:
    d = t if isinstance(t, dict) else getattr(t, "__dict__", {})
    try:
        return (d["p80_ms"] - d["p20_ms"]) / d["median_ms"]
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def spread_of(comparison: dict) -> float | None:
    """Mean relative p20-p80 width of ``ours`` and ``torch``; None when the record has no percentiles."""
    widths = [_width(comparison.get(k)) for k in ("ours", "torch")]
    if any(w is None for w in widths):
        return None
    return sum(widths) / 2


def ratio_text(ratio: float, spread: float | None = None) -> str:
    """``1.005`` with a 6% spread -> ``1.0×（±3%）``; without a spread: 2 significant figures, marked."""
    if not ratio or not math.isfinite(ratio):
        return "—"
    lead = math.floor(math.log10(abs(float(f"{ratio:.2g}"))))   # 0.999 leads like 1.0
    if spread is None:
        return f"{ratio:.{max(0, 1 - lead)}f}×（离散度未记录）"
    half = max(spread / 2, 1e-9)
    decimals = math.floor(-math.log10(half * abs(ratio)))
    decimals = min(max(decimals, 1 - lead), 2 - lead)       # 2 to 3 significant figures
    pct = "<0.1%" if half < 0.0005 else f"{half:.1%}" if half < 0.01 else f"{half:.0%}"  # never "±0.0%"
    return f"{ratio:.{max(0, decimals)}f}×（±{pct}）"


def comparison_text(comparison: dict) -> str:
    """speedup (torch time / ours) of a ``Comparison.as_dict()`` record, with its spread."""
    return ratio_text(comparison["speedup"], spread_of(comparison))
