#!/usr/bin/env bash
# Installs the Debian 12 packages cgr builds with (the CUDA toolkit is expected to be present
# already, at /usr/local/cuda; without it the CPU build is complete on its own).
# Skips apt entirely when everything is installed.
set -euo pipefail

packages=(cmake ninja-build g++ libfmt-dev doctest-dev nlohmann-json3-dev libonnx-dev libprotobuf-dev
          protobuf-compiler)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "cgr: installing ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
