#!/usr/bin/env bash
# Installs the Debian 12 packages cgr needs (the CUDA toolkit is expected at /usr/local/cuda
# already; without it the CPU build is complete on its own). Skips apt entirely when
# everything is installed, and each PyPI part when it is there. Flags combine.
#   scripts/install-deps.sh            what the build needs
#   scripts/install-deps.sh --sample   plus what the main job trains with: Debian's PyTorch,
#                                      torchvision and scikit-learn (its digits data set)
#   scripts/install-deps.sh --serving  plus what serving on Triton needs (serving/triton):
#                                      Python's headers and nanobind (the Python package's
#                                      build), libpython3.11 (Triton's Python backend stub
#                                      embeds it), and from PyPI into /opt/cgr/triton (pinned):
#                                      the tritonserver 2.51 that nvidia-pytriton 0.7.0's wheel
#                                      ships (CPU and CUDA, Python backend), with its stub for
#                                      Debian's Python 3.11 copied into backends/python/, and a
#                                      venv over Debian's python3 with tritonclient[http,grpc]
#                                      2.73.0 (its protobuf 6 stays out of Debian's path, where
#                                      Debian's onnx needs Debian's protobuf 3)
#   scripts/install-deps.sh --peers    plus what bench/peers/cpu-vs-ort.sh needs: Debian's PyTorch,
#                                      torchvision and onnx (the models' export), and from PyPI
#                                      into /opt/cgr/peers the current onnxruntime, 1.31.1 (the
#                                      peer; the tests' 1.19.2 drops count_include_pad when it
#                                      fuses a Pad into an AveragePool, wrong on inception_v3)
#   scripts/install-deps.sh --tests    what the test suite needs: all of the above, Debian's
#                                      onnx (the conformance reference), clang with its
#                                      runtime (libFuzzer), venv and pytest (the Python
#                                      package), and from PyPI into /opt/cgr/python (Debian has
#                                      no package, or too old a one): onnxruntime (the second
#                                      reference), pinned to a wheel for Debian's numpy;
#                                      nanobind and scikit-build-core (the Python package's
#                                      build) with the packaging and pathspec versions
#                                      scikit-build-core needs
set -euo pipefail

sample=0 serving=0 tests=0 peers=0
for flag in "$@"; do
  case "$flag" in
    --sample) sample=1 ;;
    --serving) serving=1 ;;
    --peers) peers=1 sample=1 ;;
    --tests) tests=1 sample=1 serving=1 ;;
    *) echo "usage: install-deps.sh [--sample] [--serving] [--peers] [--tests]" >&2; exit 2 ;;
  esac
done

# ocl-icd-opencl-dev: Debian's oneDNN is built with an OpenCL GPU runtime, and its CMake package
# refuses to load without OpenCL's headers and library, which libdnnl-dev only recommends.
packages=(cmake ninja-build g++ libfmt-dev doctest-dev nlohmann-json3-dev libcli11-dev libonnx-dev libdnnl-dev
          ocl-icd-opencl-dev libprotobuf-dev protobuf-compiler)
if ((sample)); then
  packages+=(python3 python3-numpy python3-torch python3-torchvision python3-sklearn)
fi
if ((serving)); then
  packages+=(python3 python3-numpy python3-dev python3-venv libpython3.11)
fi
if ((peers)); then
  packages+=(python3-onnx)
fi
if ((tests)); then
  packages+=(python3-onnx clang libclang-rt-14-dev python3-pytest)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
if ((${#missing[@]})); then
  # A package two flags both name is listed once.
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "cgr: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

if ((peers)); then
  peer_deps=/opt/cgr/peers
  if ! PYTHONPATH=$peer_deps /usr/bin/python3 -c \
      "import onnxruntime, sys; sys.exit(onnxruntime.__version__ != '1.31.1')" >/dev/null 2>&1; then
    echo "cgr: installing onnxruntime 1.31.1 into $peer_deps"
    "${sudo_cmd[@]}" rm -rf "$peer_deps"
    "${sudo_cmd[@]}" /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-deps \
      --target "$peer_deps" onnxruntime==1.31.1 2>&1 | grep -v "as the 'root' user" || true
    PYTHONPATH=$peer_deps /usr/bin/python3 -c "import onnxruntime" ||
      { echo "cgr: onnxruntime did not install into $peer_deps" >&2; exit 1; }
  fi
fi

python_deps=/opt/cgr/python
if ((tests)); then
  if ! PYTHONPATH=$python_deps /usr/bin/python3 -c "import onnxruntime" >/dev/null 2>&1; then
    echo "cgr: installing onnxruntime 1.19.2 into $python_deps"
    "${sudo_cmd[@]}" /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-deps \
      --target "$python_deps" onnxruntime==1.19.2 2>&1 | grep -v "as the 'root' user" || true
    PYTHONPATH=$python_deps /usr/bin/python3 -c "import onnxruntime" ||
      { echo "cgr: onnxruntime did not install into $python_deps" >&2; exit 1; }
  fi
fi
if ((tests || serving)); then
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

if ((serving)); then
  # Triton Inference Server (serving/triton, tests/serving): the server from nvidia-pytriton's
  # wheel (only its tritonserver folder is used: pytriton's own API fails on Python 3.11) and
  # the client in a venv.
  triton=/opt/cgr/triton
  server=$triton/server/pytriton/tritonserver
  if [ ! -x "$server/bin/tritonserver" ] ||
     [ ! -x "$server/backends/python/triton_python_backend_stub" ]; then
    echo "cgr: installing Triton Inference Server (nvidia-pytriton 0.7.0's tritonserver) into $triton/server"
    "${sudo_cmd[@]}" rm -rf "$triton/server"
    "${sudo_cmd[@]}" /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-deps \
      --target "$triton/server" nvidia-pytriton==0.7.0 2>&1 | grep -v "as the 'root' user" || true
    stub=$server/python_backend_stubs/3.11/triton_python_backend_stub
    [ -x "$server/bin/tritonserver" ] && [ -f "$stub" ] ||
      { echo "cgr: nvidia-pytriton did not install a tritonserver and a Python 3.11 stub into $triton/server" >&2; exit 1; }
    "${sudo_cmd[@]}" install -m 755 "$stub" "$server/backends/python/triton_python_backend_stub"
  fi
  if ! "$triton/venv/bin/python" -c "import tritonclient.http, tritonclient.grpc" >/dev/null 2>&1; then
    echo "cgr: installing tritonclient[http,grpc] 2.73.0 into the venv $triton/venv"
    "${sudo_cmd[@]}" rm -rf "$triton/venv"
    "${sudo_cmd[@]}" /usr/bin/python3 -m venv --system-site-packages "$triton/venv"
    "${sudo_cmd[@]}" "$triton/venv/bin/python" -m pip install -q --disable-pip-version-check \
      "tritonclient[http,grpc]==2.73.0" 2>&1 | grep -v "as the 'root' user" || true
    "$triton/venv/bin/python" -c "import tritonclient.http, tritonclient.grpc" ||
      { echo "cgr: tritonclient did not install into $triton/venv" >&2; exit 1; }
  fi
fi
