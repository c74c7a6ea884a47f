"""Versioned report model and one writer per output format."""

from kimi_bench.report.model import Report, ReportError, load_report

__all__ = ["Report", "ReportError", "load_report"]
