#!/usr/bin/env bash
# Builds a CPU-only Ollama for the real-Ollama test tier (internal/realollama)
# from the copy of the module in the Go module cache, and prints the path of
# the binary. The binary is cached under .cache/ (git-ignored) keyed by
# version, so a warm run returns at once; Go's build cache also keeps the cgo
# objects, so a rebuild after deleting the binary takes a fraction of a cold
# build (see README, the real-Ollama tier).
#
# Module zips drop vendor/ directories, so llama.cpp's vendored headers are
# missing: Debian's nlohmann-json3-dev and libstb-dev supply two of them, and
# scripts/ollama-include/miniaudio/miniaudio.h stands in for the third.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

version=0.17.4
module=github.com/ollama/ollama@v$version
out=$repo/.cache/ollama-$version/ollama

if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi

if [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -f /usr/include/stb/stb_image.h ]; then
  echo "installing: nlohmann-json3-dev libstb-dev" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends nlohmann-json3-dev libstb-dev g++ >/dev/null
fi

# The module is a dependency of go.mod, so this only downloads on a fresh cache.
src=$(go mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ]; then
  echo "build-ollama: cannot find $module in the module cache" >&2
  exit 1
fi

# The module cache is read-only; build in a writable copy so go build can run
# inside the module (its own go.mod and go.sum). The copy keeps one path,
# next to Go's build cache and out of the repository (whose gofmt and vet
# would see it): cgo's compiled objects are cached by Go keyed on it, so a
# rebuild reuses them.
work=$(go env GOCACHE)/chainproxy-ollama-src-$version
if [ ! -f "$work/go.mod" ]; then
  rm -rf "$work"
  mkdir -p "$work"
  cp -r "$src"/. "$work"/
  chmod -R u+w "$work"
fi

mkdir -p "$(dirname "$out")"
(
  cd "$work"
  CGO_ENABLED=1 \
  CGO_CPPFLAGS="-I$repo/scripts/ollama-include" \
    go build -trimpath -ldflags "-X github.com/ollama/ollama/version.Version=$version" \
      -o "$out.tmp" . >&2
)
mv "$out.tmp" "$out"
echo "$out"
