#!/usr/bin/env bash
# Sets up everything the project needs on a fresh Debian/Ubuntu machine, idempotently:
#   - Debian packages (installed with apt-get when missing and we are root),
#   - a virtual environment at .venv with the project and its pinned dependencies (pip path).
# Re-running is cheap: the pip step is skipped while pyproject.toml is unchanged.
# Conda users: see environment.yml instead.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# git for DVC; flite and espeak-ng synthesise talk audio (flite also gives the aligner pronunciations);
# pocketsphinx-testdata has real LibriVox speech for the alignment benchmark.
DEBIAN_PACKAGES=(git flite espeak-ng pocketsphinx-testdata)

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install these Debian packages first: ${missing[*]}" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -e "$stamp" ]; then
  echo "setup: installing the project and its pinned dependencies into .venv (first time: a few minutes)"
  .venv/bin/python -m pip install -q --upgrade pip
  # torch is pinned exactly (torch==2.13.0, CPU build) in pyproject.toml: a looser spec pulls a multi-GB CUDA build.
  .venv/bin/python -m pip install -q -e ".[test]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# DVC needs a git repository (a plain copy of the sources, e.g. from an archive, has none).
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  git init -q
fi
echo "setup: ready (.venv/bin/python, .venv/bin/dvc, .venv/bin/punctuate)"
