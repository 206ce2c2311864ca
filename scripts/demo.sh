#!/usr/bin/env bash
# Installs what is missing, builds, makes the bundled synthetic demo model,
# converts it to GGUF and runs a short generation (prints tok/s, expert-cache
# statistics and memory). The model's weights are random: the text is noise.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
mkdir -p models
if [ ! -f models/tiny/config.json ]; then
  ./build/petrel synth --preset tiny -o models/tiny
fi
if [ ! -f models/tiny.gguf ]; then
  ./build/petrel convert models/tiny -o models/tiny.gguf
fi
./build/petrel run -m models/tiny.gguf -p "The petrel flies over the sea" -n 48 --expert-slots 8
