"""Hold kimi-bench against the installed SGLang runtime's own code (``--reference sglang``).

Imported only when asked for: importing this package does not import sglang;
:func:`load_runtime` does, and raises :class:`SglangMissingError` (with the install hint:
``requirements-sglang.txt`` via ``scripts/sglang-env.sh``) or :class:`SglangVersionError`
(naming the function and the installed version).

- :mod:`.runtime`: finds the runtime and its functions by name (errors, version);
- :mod:`.calls`: calls them as shipped, with named stand-ins for what they read;
- :mod:`.features`: per-input rows (plan, decision, eager and deferred FP32/BF16);
- :mod:`.scheduling`: owner assignment and pre-embed whitelist on generated batches.
"""

from kimi_bench.sglang_ref.features import (
    REFERENCE_KEYS,
    first_difference,
    reference_metadata,
    reference_rows,
    tensor_difference,
)
from kimi_bench.sglang_ref.runtime import (
    INSTALL_HINT,
    TESTED_VERSION,
    Runtime,
    SglangMissingError,
    SglangUnavailable,
    SglangVersionError,
    load_runtime,
)
from kimi_bench.sglang_ref.scheduling import (
    assignment_cases,
    compare_assignments,
    compare_whitelist,
    first_assignment_difference,
    first_whitelist_difference,
    whitelist_candidates,
)

__all__ = [
    "INSTALL_HINT",
    "REFERENCE_KEYS",
    "TESTED_VERSION",
    "Runtime",
    "SglangMissingError",
    "SglangUnavailable",
    "SglangVersionError",
    "assignment_cases",
    "compare_assignments",
    "compare_whitelist",
    "first_assignment_difference",
    "first_difference",
    "first_whitelist_difference",
    "load_runtime",
    "reference_metadata",
    "reference_rows",
    "tensor_difference",
    "whitelist_candidates",
]
