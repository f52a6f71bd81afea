"""What ``bench.tracing`` and ``bench.tracing_app`` share: an exporter that only counts,
a variant's table cells and its verdict line."""

from __future__ import annotations

import statistics

__all__ = ["CountingExporter", "cpu_cells", "median", "verdict"]


class CountingExporter:
    """A span exporter that counts what it is handed and keeps nothing."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def median(values: list[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")


def cpu_cells(cpu: list[float], overhead: list[float]) -> str:
    """A variant's table cells: CPU median, its range, the overhead's median and range."""
    extra = (
        f"{median(overhead):+.1%} | {min(overhead):+.1%} - {max(overhead):+.1%}"
        if overhead
        else "— | —"
    )
    return f"{median(cpu):,.1f} | {min(cpu):,.1f} - {max(cpu):,.1f} | {extra}"


def verdict(label: str, overhead: list[float], target: float) -> str:
    """``- <label>: 1.0xx of off (target ≤ 1.0y): met`` (or ``missed``)."""
    middle = median(overhead)
    met = "met" if middle <= target else "missed"
    return f"- {label}: {1 + middle:.3f}x off (target ≤ {1 + target:.2f}x): {met}"
