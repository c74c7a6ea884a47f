"""JUnit XML for gate results: one test case per rule (CI systems render these)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from kimi_bench.report.gate_verdict import FAIL, SKIP, RuleResult


def junit_xml(results: Sequence[RuleResult], suite: str = "kimi-bench gate") -> str:
    failures = sum(1 for r in results if r.verdict == FAIL)
    skipped = sum(1 for r in results if r.verdict == SKIP)
    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for r in results:
        case = ET.SubElement(root, "testcase", classname=r.report or "kimi_bench.gate", name=r.rule)
        text = f"measured={r.measured!r} limit={r.limit!r}: {r.reason}"
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="verdict", value=str(r.verdict))
        if r.verdict == FAIL:
            ET.SubElement(case, "failure", message=r.reason).text = text
        elif r.verdict == SKIP:
            ET.SubElement(case, "skipped", message=r.reason)
        else:
            ET.SubElement(case, "system-out").text = text
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(results: Sequence[RuleResult], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(results))
    return path
