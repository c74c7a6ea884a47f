"""Package discovery for setuptools (metadata lives in pyproject.toml).

Every package under ``kimi_bench/`` is found automatically, so a new subpackage ships
without editing a list; the built-in scenarios live in the top-level ``scenarios/`` folder
of the checkout and install as ``kimi_bench.scenarios`` (pyproject.toml alone cannot add a
remapped package to automatic discovery)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["kimi_bench", "kimi_bench.*"]), "kimi_bench.scenarios"],
    package_dir={"kimi_bench.scenarios": "scenarios"},
)
