#!/usr/bin/env python3
"""Rewrites README.md's list of ONNX op types (between <!-- onnx-ops --> markers) from the
importer's CGR_ONNX_OP registrations; tests/test_coverage.cpp checks the two agree."""
import pathlib
import re
import textwrap

root = pathlib.Path(__file__).resolve().parent.parent
ops = sorted({m for f in (root / "engine/src/onnx").glob("*.cpp")
              for m in re.findall(r'CGR_ONNX_OP\("([A-Za-z]+)"', f.read_text())})
readme = root / "README.md"
text = readme.read_text()
begin, end = "<!-- onnx-ops -->\n", "<!-- /onnx-ops -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
body = "\n".join(textwrap.wrap(", ".join(ops), width=95, break_on_hyphens=False))
readme.write_text(head + begin + body + "\n" + end + tail)
print(f"README.md: {len(ops)} ONNX op types")
