"""Calibrated projection of micro's stage costs to larger rank counts and nodes
(``kimi-bench project``): read a micro report (``calibration``), scale every stage by its
kind (``model``), predict rank counts and nodes (``projection``), check predictions against
measured reports (``validate``), and write the report and figure (``build``, ``figure``)."""

from kimi_bench.project.build import build_projection, emit_projection
from kimi_bench.project.calibration import Calibration, ProjectionError, read_calibration
from kimi_bench.project.model import Host, Topology
from kimi_bench.project.probe import CopyProbe, load_probe
from kimi_bench.project.projection import Scale

__all__ = [
    "Calibration",
    "CopyProbe",
    "Host",
    "ProjectionError",
    "Scale",
    "Topology",
    "build_projection",
    "emit_projection",
    "load_probe",
    "read_calibration",
]
