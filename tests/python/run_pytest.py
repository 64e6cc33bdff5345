#!/usr/bin/env python3
"""Runs the pytest suites of the Python package for CTest (the test `python_package`).

    run_pytest.py TEST_DIR [pytest arguments...]
    run_pytest.py --skipped REASON      (the module was not built: prints why, exits 77)

The package is found on PYTHONPATH (CTest points it at <build>/python and the folder of
install-deps.sh's PyPI packages). Exit 77 (CTest: skipped) only when what the suites need is
genuinely missing: torch or numpy for the interpreter, or nanobind at configure time. pytest's
exit 5 ("no tests collected") is a failure: a suite that runs nothing must not pass.
"""

import importlib.util
import subprocess
import sys

SKIPPED = 77
NO_TESTS_COLLECTED = 5


def main(argv):
    if len(argv) >= 2 and argv[0] == "--skipped":
        print(f"python_package skipped: {argv[1]}")
        return SKIPPED
    if not argv:
        print("usage: run_pytest.py TEST_DIR [pytest arguments...]", file=sys.stderr)
        return 2
    missing = [m for m in ("numpy", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"python_package skipped: {sys.executable} has no {', '.join(missing)} "
              "(Debian: python3-numpy, python3-torch; scripts/install-deps.sh --tests)")
        return SKIPPED
    if importlib.util.find_spec("pytest") is None:
        print(f"{sys.executable} has no pytest (Debian: python3-pytest; "
              "scripts/install-deps.sh --tests)", file=sys.stderr)
        return 1
    if importlib.util.find_spec("cgr") is None:
        print("the package cgr is not on PYTHONPATH (build the target _cgr)", file=sys.stderr)
        return 1
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *argv]
    status = subprocess.call(command)
    if status == NO_TESTS_COLLECTED:
        print(f"pytest collected no tests in {argv[0]}: failing (exit 5 is not a pass)",
              file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
