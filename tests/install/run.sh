#!/usr/bin/env bash
# Installs fuse from SOURCE into a scratch prefix, then configures, builds and runs a consumer
# project that finds it with find_package(fuse). Usage: run.sh SOURCE_DIR SCRATCH_DIR
set -euo pipefail
src=$1 scratch=$2
rm -rf "$scratch" && mkdir -p "$scratch"
cmake -S "$src" -B "$scratch/build" -DFUSE_BUILD_TESTS=OFF -DFUSE_BUILD_EXAMPLES=OFF -DFUSE_BUILD_TOOLS=OFF -DFUSE_CUDA=OFF >/dev/null
cmake --install "$scratch/build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$src/tests/install" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/consumer"
