#!/usr/bin/env bash
# Installs the Debian 12 packages cgr needs (the CUDA toolkit is expected at /usr/local/cuda
# already; without it the CPU build is complete on its own). Skips apt entirely when
# everything is installed.
#   scripts/install-deps.sh           what the build needs
#   scripts/install-deps.sh --sample  plus what the main job trains with: Debian's PyTorch,
#                                     torchvision and scikit-learn (its digits data set)
#   scripts/install-deps.sh --tests   plus what the test suite needs: Debian's PyTorch,
#                                     torchvision, scikit-learn and onnx (the conformance
#                                     reference; the main job's training),
#                                     clang with its runtime (libFuzzer), Python's headers, venv
#                                     and pytest (the Python package), and from PyPI into
#                                     /opt/cgr/python (Debian has no package, or too old a one):
#                                     onnxruntime (the second reference), pinned to a wheel for
#                                     Debian's numpy; nanobind and scikit-build-core (the Python
#                                     package's build) with the packaging and pathspec versions
#                                     scikit-build-core needs
set -euo pipefail

packages=(cmake ninja-build g++ libfmt-dev doctest-dev nlohmann-json3-dev libcli11-dev libonnx-dev
          libprotobuf-dev protobuf-compiler)
if [[ "${1:-}" == "--sample" || "${1:-}" == "--tests" ]]; then
  packages+=(python3 python3-numpy python3-torch python3-torchvision python3-sklearn)
fi
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(python3-onnx clang libclang-rt-14-dev python3-dev python3-venv python3-pytest)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
if ((${#missing[@]})); then
  echo "cgr: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

if [[ "${1:-}" == "--tests" ]]; then
  python_deps=/opt/cgr/python
  if ! PYTHONPATH=$python_deps /usr/bin/python3 -c "import onnxruntime" >/dev/null 2>&1; then
    echo "cgr: installing onnxruntime 1.19.2 into $python_deps"
    "${sudo_cmd[@]}" /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-deps \
      --target "$python_deps" onnxruntime==1.19.2 2>&1 | grep -v "as the 'root' user" || true
    PYTHONPATH=$python_deps /usr/bin/python3 -c "import onnxruntime" ||
      { echo "cgr: onnxruntime did not install into $python_deps" >&2; exit 1; }
  fi
  # The Python package's build: pure-Python wheels, pinned, without their dependencies (the
  # two scikit-build-core needs are pinned here too).
  python_build=(nanobind==2.9.2 scikit-build-core==0.11.6 packaging==24.2 pathspec==0.12.1)
  # Each at its pinned version, found first on the path (before Debian's older packaging).
  pinned_found='import importlib.metadata as m, sys
sys.exit(any(m.version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))'
  if ! PYTHONPATH=$python_deps /usr/bin/python3 -c "$pinned_found" "${python_build[@]}" \
      >/dev/null 2>&1; then
    echo "cgr: installing ${python_build[*]} into $python_deps"
    "${sudo_cmd[@]}" /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-deps \
      --upgrade --target "$python_deps" "${python_build[@]}" 2>&1 |
      grep -v "as the 'root' user" || true
    PYTHONPATH=$python_deps /usr/bin/python3 -c "import nanobind, scikit_build_core" ||
      { echo "cgr: nanobind or scikit-build-core did not install into $python_deps" >&2; exit 1; }
  fi
fi
