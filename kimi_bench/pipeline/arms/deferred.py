"""``deferred``: the runtime with the change. The deferral policy decides per request or
per image (runtime profile); deferred images travel as raw uint8 with their record, images
above the byte heuristic go eager inside the arm (a mixed batch, in input order). The
model class is whitelisted: no pre-embed move; only the owner copies its raw images to its
device and materializes them. Every step is the base arm's."""

from __future__ import annotations

from kimi_bench.pipeline.arms.base import Arm


class Deferred(Arm):
    role = "change"
