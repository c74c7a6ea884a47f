"""Versioned report model (``report.model``: Report, ReportError, load_report) and one
writer per output format. Nothing is imported here, so a light module of the package
(``report.quote``, which every message goes through) does not load the report model."""
