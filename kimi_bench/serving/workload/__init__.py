"""Workloads as data (issue 43): what serve-ab's requests carry, built once before any
server starts and the same for every arm. The distributions' text forms are parsed by
``kimi_bench.options.workload_specs`` (the options validate them)."""

from kimi_bench.options.workload_specs import WorkloadError
from kimi_bench.serving.workload.build import build_workload
from kimi_bench.serving.workload.model import PoolImage, Workload, WorkRequest
from kimi_bench.serving.workload.summary import size_bucket, summarize

__all__ = ["PoolImage", "WorkRequest", "Workload", "WorkloadError", "build_workload",
           "size_bucket", "summarize"]  # fmt: skip
