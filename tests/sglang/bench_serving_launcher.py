"""Run ``sglang.bench_serving`` in the SGLang reference env without changing it:
``python tests/sglang/bench_serving_launcher.py <bench_serving args>``.

Two imports fail there on a CPU machine: torchvision's C ops (PyPI's wheel links the CUDA
torch; handled as kimi_bench.sglang_ref does) and HF ``datasets`` (imported at module
level by sglang's benchmark datasets, used only by the hub datasets; a stub that raises
when called stands in, so ``random-ids`` and ``image`` work)."""

from __future__ import annotations

import runpy
import sys
import types


def main() -> None:
    from kimi_bench.sglang_ref.runtime import _torchvision_without_ops

    _torchvision_without_ops()
    try:
        import datasets  # noqa: F401
    except ImportError:
        stub = types.ModuleType("datasets")

        def load_dataset(*args: object, **kwargs: object) -> None:
            raise RuntimeError("HF datasets is not installed in this env (hub datasets only)")

        stub.load_dataset = load_dataset  # type: ignore[attr-defined]
        sys.modules["datasets"] = stub
    sys.argv = ["sglang.bench_serving", *sys.argv[1:]]
    runpy.run_module("sglang.bench_serving", run_name="__main__")


if __name__ == "__main__":
    main()
