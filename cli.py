"""Run kimi-bench from a checkout without installing: ``python cli.py parity --help``."""

from kimi_bench.cli.main import main

if __name__ == "__main__":
    main()
