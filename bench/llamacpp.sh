#!/bin/sh
# bench/llamacpp.sh — builds llama.cpp's CPU tools once, as the reproducible
# peer every Petrel benchmark compares with (issue 11).
#
# Source: the git bundle of llama.cpp shipped inside the npm package
# node-llama-cpp (pinned below). It is installed with --ignore-scripts, so
# nothing but the package itself is downloaded; the bundle is cloned with
# plain `git clone`. Two builds land in the cache folder:
#   $CACHE/build/bin/         default build (GGML_NATIVE=ON, CPU repacking on)
#   $CACHE/build-norepack/bin/ the same with GGML_CPU_REPACK=OFF (the build that
#                              survives a memory cap: repacking copies weights)
# Targets: llama-bench, llama-cli, llama-simple, llama-quantize, llama-gguf-split.
#
# Usage: bench/llamacpp.sh [--print-dir] [--norepack-only]
#   Prints the bin directories when done ("LLAMACPP_BIN=...", "LLAMACPP_BIN_NOREPACK=...").
#   LLAMACPP_CACHE overrides the cache folder (default ~/.cache/petrel/llamacpp-<version>).
# The test suite never needs this.
set -eu
VERSION=3.22.1
CACHE=${LLAMACPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/petrel/llamacpp-$VERSION}
JOBS=$(nproc)
TARGETS="llama-bench llama-cli llama-simple llama-quantize llama-gguf-split"
mkdir -p "$CACHE"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need npm || ! need git || ! need cmake || ! need g++; then
    echo "bench/llamacpp.sh: installing npm, git, cmake, g++" >&2
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq npm git cmake g++ >/dev/null
fi

if [ ! -d "$CACHE/src/.git" ]; then
    echo "bench/llamacpp.sh: fetching node-llama-cpp@$VERSION (source bundle only)" >&2
    rm -rf "$CACHE/npm" "$CACHE/src"
    mkdir -p "$CACHE/npm"
    (cd "$CACHE/npm" && npm install --ignore-scripts --no-audit --no-fund "node-llama-cpp@$VERSION" >/dev/null)
    git clone -q "$CACHE/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$CACHE/src.tmp"
    mv "$CACHE/src.tmp" "$CACHE/src"
fi

# On CPUs with AMX, GGML_NATIVE compiles ggml's AMX buffer type, and with it
# llama.cpp aborts while reserving the deepseek2 graph of a MoE model
# ("ggml-backend.cpp: GGML_ASSERT(*cur_backend_id != -1) failed", llama.cpp
# issues #18099 and #19184: an op whose weights sit in the AMX buffer that no
# backend accepts). Both builds are then made with AMX off (every other
# native ISA extension stays on: GCC's explicit -mno-* wins over
# -march=native), so that llama.cpp runs here at all.
NOAMX=
if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
    NOAMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi

build() { # $1 = build dir, $2.. = extra cmake flags
    dir=$1; shift
    # the flags a build was made with; a build made with others is remade
    stamp="$* cflags=$NOAMX"
    ok=1
    for t in $TARGETS; do [ -x "$CACHE/$dir/bin/$t" ] || ok=0; done
    [ "$(cat "$CACHE/$dir.flags" 2>/dev/null)" = "$stamp" ] || ok=0
    [ $ok = 1 ] && return 0
    rm -f "$CACHE/$dir/CMakeCache.txt"
    [ -n "$NOAMX" ] && echo "bench/llamacpp.sh: this CPU has AMX: building without it ($NOAMX; see above)" >&2
    echo "bench/llamacpp.sh: building $dir ($TARGETS; ~12 minutes on 2 cores)" >&2
    cmake -S "$CACHE/src" -B "$CACHE/$dir" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_C_FLAGS="$NOAMX" -DCMAKE_CXX_FLAGS="$NOAMX" "$@" >"$CACHE/$dir.cmake.log" 2>&1 ||
        { cat "$CACHE/$dir.cmake.log" >&2; exit 1; }
    # shellcheck disable=SC2086
    cmake --build "$CACHE/$dir" -j"$JOBS" --target $TARGETS >"$CACHE/$dir.build.log" 2>&1 ||
        { tail -40 "$CACHE/$dir.build.log" >&2; exit 1; }
    echo "$stamp" >"$CACHE/$dir.flags"
}

if [ "${1:-}" != "--norepack-only" ] && [ "${2:-}" != "--norepack-only" ]; then
    build build
fi
build build-norepack -DGGML_CPU_REPACK=OFF
echo "LLAMACPP_BIN=$CACHE/build/bin"
echo "LLAMACPP_BIN_NOREPACK=$CACHE/build-norepack/bin"
echo "LLAMACPP_COMMIT=$(git -C "$CACHE/src" rev-parse HEAD)"
