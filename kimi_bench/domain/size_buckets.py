"""Image size buckets: each image in the bucket of its longest side (pixels). The one
bucketing every serve-ab table and the workload summary use."""

from __future__ import annotations

# longest side (pixels) -> bucket label; the last bucket is open
BUCKETS = ((256, "1-256"), (512, "257-512"), (1024, "513-1024"), (2048, "1025-2048"))
TOP_BUCKET = "2049+"
BUCKET_ORDER = (*(label for _, label in BUCKETS), TOP_BUCKET)


def size_bucket(width: int, height: int) -> str:
    side = max(width, height)
    return next((label for edge, label in BUCKETS if side <= edge), TOP_BUCKET)
