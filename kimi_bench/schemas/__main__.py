"""``python -m kimi_bench.schemas``: regenerate the shipped JSON Schemas."""

from kimi_bench.schemas import write_schemas

for path in write_schemas():
    print(path)
