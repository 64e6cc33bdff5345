#!/usr/bin/env python3
"""`pip install .` of the Python package into a fresh venv, then cgr used from outside the
source tree (the CTest test `python_wheel`).

    check_wheel.py --source REPO --work FOLDER --deps DEPS_DIR [--cuda]

FOLDER keeps the wheel's CMake build between runs (FOLDER/build: a rebuild is incremental);
the venv (FOLDER/venv, --system-site-packages for Debian's numpy and torch) is made afresh
each time. The build runs offline: --no-build-isolation with scikit-build-core and nanobind
from DEPS_DIR (scripts/install-deps.sh --tests), --no-deps --no-index. CUDA parts are left out
unless --cuda (the CPU build is what the check needs, and half the time).

The check: the installed module and the libcgr it loads both come from the venv's
site-packages (the wheel bundles libcgr; RUNPATH $ORIGIN), and an inference of a small torch
model compiled with cgr.compile matches PyTorch. Prints how long the wheel took to build.
Exit 77 (skipped) when Debian's python3-venv or torch is missing.
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

SKIPPED = 77

CHECK = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import torch
    import cgr

    venv = sys.prefix
    assert cgr.__file__.startswith(venv), f"cgr imported from {cgr.__file__}, not from {venv}"
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "libcgr.so" in line})
    assert libs and all(p.startswith(venv) for p in libs), f"libcgr loaded from {libs}"

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()
    x = torch.randn(1, 3, 16, 16)
    engine = cgr.compile(model, x, threads=1)
    got = engine(x.numpy())["output"]
    want = model(x).detach().numpy()
    error = float(np.abs(got - want).max() / np.abs(want).max())
    assert error <= 1e-5, f"relative error {error}"
    print(f"installed cgr from {os.path.dirname(cgr.__file__)}; libcgr {libs[0]}")
    print(f"one inference: {engine!r}, relative error vs torch {error:.2g}")
    """
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="the repository (holds pyproject.toml)")
    parser.add_argument("--work", required=True, help="folder for the venv and the build")
    parser.add_argument("--deps", required=True, help="folder with scikit-build-core, nanobind")
    parser.add_argument("--cuda", action="store_true", help="build the CUDA parts too")
    args = parser.parse_args()

    if importlib.util.find_spec("venv") is None or importlib.util.find_spec("ensurepip") is None:
        print(f"python_wheel skipped: {sys.executable} has no venv/ensurepip (Debian: python3-venv)")
        return SKIPPED
    if importlib.util.find_spec("torch") is None:
        print(f"python_wheel skipped: {sys.executable} has no torch (Debian: python3-torch)")
        return SKIPPED

    work = os.path.abspath(args.work)
    venv = os.path.join(work, "venv")
    shutil.rmtree(venv, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    python = os.path.join(venv, "bin", "python")

    env = dict(os.environ)
    env["PYTHONPATH"] = args.deps  # the build backend and nanobind; never the build tree's cgr
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    install = [
        python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
        "--disable-pip-version-check", "-q",
        f"--config-settings=build-dir={os.path.join(work, 'build')}",
        f"--config-settings=cmake.define.CGR_ENABLE_CUDA={'ON' if args.cuda else 'OFF'}",
        args.source,
    ]
    print("+", " ".join(install), flush=True)
    started = time.monotonic()
    status = subprocess.run(install, env=env).returncode
    seconds = time.monotonic() - started
    print(f"pip install . took {seconds:.1f} s ({'with' if args.cuda else 'without'} CUDA)",
          flush=True)
    if status != 0:
        print(f"pip install failed with exit status {status}", file=sys.stderr)
        return 1

    # From a folder outside the source tree, without PYTHONPATH: only the venv's cgr is there.
    check_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="cgr-wheel-check-") as outside:
        status = subprocess.run([python, "-c", CHECK], cwd=outside, env=check_env).returncode
    if status != 0:
        print("the installed package failed its check", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
