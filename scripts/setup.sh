#!/usr/bin/env bash
# Sets up everything the project needs, idempotently:
#   - system packages: on Debian/Ubuntu as root, installed with apt-get when missing; anywhere else (macOS, other
#     distributions, no root) each missing one is named with what needs it and how to get it, and the set-up goes
#     on without the optional ones (git alone is required);
#   - a virtual environment at .venv with the project and its pinned dependencies (pip path).
# Re-running is cheap: the pip step is skipped while pyproject.toml is unchanged.
# Conda users: see environment.yml instead.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# git for DVC; flite and espeak-ng synthesise talk audio (flite also gives the aligner pronunciations);
# pocketsphinx-testdata has real LibriVox speech for the alignment benchmark.
DEBIAN_PACKAGES=(git flite espeak-ng pocketsphinx-testdata)

# What needs each package, for a machine where setup cannot install it.
role() {
  case "$1" in
    git) echo "required: DVC keeps the pipeline's state in a git repository" ;;
    flite) echo "the audio half of \`dvc repro\` (synthesize: talk audio; align: pronunciations of numbers);" \
                "without it \`dvc repro\` stops at synthesize, and the tests that need it skip" ;;
    espeak-ng) echo "optional: only the opt-in espeak-ng voices (params audio.voices); their tests skip" ;;
    pocketsphinx-testdata) echo "optional: only the real-speech part of benchmarks/alignment.py, which skips it" ;;
  esac
}

# Whether a package's files are here: dpkg where there is one, else the command or the data itself.
present() {
  if command -v dpkg >/dev/null; then
    dpkg -s "$1" >/dev/null 2>&1
    return
  fi
  case "$1" in
    pocketsphinx-testdata) [ -d /usr/share/pocketsphinx/test/data/librivox ] ;;
    *) command -v "$1" >/dev/null ;;
  esac
}

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  present "$package" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    {
      echo "setup: these packages are missing, and setup installs them only as root on Debian/Ubuntu:"
      for package in "${missing[@]}"; do echo "  $package: $(role "$package")"; done
      echo "setup: to install them, then run setup again:"
      echo "  Debian/Ubuntu:  sudo apt-get install ${missing[*]}"
      others=$(echo "${missing[*]}" | sed 's/ *pocketsphinx-testdata//')  # a Debian package alone
      if [ -n "$others" ]; then
        echo "  Fedora:         sudo dnf install $others"
        echo "  macOS:          brew install $others  (but the audio stages load flite's and espeak-ng's"
        echo "                  Linux libraries, libflite.so.1 and libespeak-ng.so.1: on macOS the audio half"
        echo "                  of \`dvc repro\` does not run; the text stages and the tests do)"
        echo "  conda:          conda env create -f environment.yml  (git and flite from conda-forge)"
      fi
    } >&2
    if [[ " ${missing[*]} " == *" git "* ]]; then
      echo "setup: git is required; stopping" >&2
      exit 1
    fi
    echo "setup: going on without ${missing[*]} (see above for what that leaves out)" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
if command -v sha256sum >/dev/null; then
  digest=$(sha256sum pyproject.toml | cut -c1-16)
else  # macOS has shasum instead
  digest=$(shasum -a 256 pyproject.toml | cut -c1-16)
fi
stamp=.venv/.installed-$digest
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
