#!/usr/bin/env bash
# Installs this build of fuse (the header-only library and the frontend library already built in
# BUILD_DIR) into a scratch prefix, then configures, builds and runs a consumer project that finds
# it with find_package(fuse COMPONENTS relay), and COMPONENTS cuda (a .cu consumer run through
# the emulator) when nvcc's path is the fourth argument. Usage: run.sh SOURCE_DIR BUILD_DIR
# SCRATCH_DIR [NVCC]
set -euo pipefail
src=$1 build=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
if grep -rlE "#include [<\"]nlohmann" "$scratch/prefix/include/fuse"; then
  echo "installed headers include nlohmann-json (above)"; exit 1
fi
cuda=(-DFUSE_CONSUMER_CUDA=OFF)
[ -n "${4:-}" ] && cuda=(-DFUSE_CONSUMER_CUDA=ON "-DCMAKE_CUDA_COMPILER=$4")
cmake -S "$src/tests/install" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" "${cuda[@]}" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/consumer"
"$scratch/consumer/relay_consumer"
if [ -n "${4:-}" ]; then
  "$scratch/consumer/cuda_consumer"
fi
