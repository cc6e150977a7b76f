#!/usr/bin/env bash
# Build the course site into OUT with warnings as errors:  docs/build.sh OUT
#
# Needs the `docs` extra (pip install -e ".[docs]") and npm; installs nothing into the environment.
# The sources are staged in a temporary folder: docs/, the notebooks (rendered from their stored
# outputs, never executed), exercises/README.md (the exercises' texts, not the solutions) and
# MathJax 3 from the npm registry (its es5/ folder with fonts and TeX extensions), so the pages
# ask no other host for anything. MHATTN_MATHJAX_TGZ may name an already downloaded mathjax tarball;
# PYTHON the interpreter with the docs extra (default: python).
set -euo pipefail
out=${1:?usage: docs/build.sh OUT}
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
src=$stage/src
mkdir -p "$src/notebooks" "$stage/npm"
cp -r "$root/docs/." "$src/"
cp "$root"/notebooks/*.ipynb "$src/notebooks/"
cp "$root/exercises/README.md" "$src/exercises.md"

MATHJAX_VERSION=3.2.2
tgz=${MHATTN_MATHJAX_TGZ:-}
if [ -z "$tgz" ]; then
    (cd "$stage/npm" && npm pack --silent "mathjax@$MATHJAX_VERSION" >/dev/null)
    tgz=$stage/npm/mathjax-$MATHJAX_VERSION.tgz
fi
tar -xzf "$tgz" -C "$stage/npm"
cp -r "$stage/npm/package/es5" "$src/_static/mathjax"

MHATTN_ROOT=$root "${PYTHON:-python}" -m sphinx -W --keep-going -q -b html -d "$stage/doctrees" "$src" "$out"
echo "site built in $out"
