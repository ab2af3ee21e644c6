#!/usr/bin/env bash
# Prints the folder holding the real models and data: $KVC_SHARED, or ../shared beside the checkout.
here="$(cd "$(dirname "$0")/.." && pwd)"
dir="${KVC_SHARED:-$here/../shared}"
if [ ! -d "$dir/models/stories260K" ]; then
  echo "kvcompact: cannot find the shared models at '$dir' (set KVC_SHARED to the folder with models/ and data/)" >&2
  exit 1
fi
cd "$dir" && pwd
