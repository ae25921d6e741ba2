#!/usr/bin/env bash
# Install Debian packages once: nothing to do (and no root needed) when they are all installed.
#
#   bash scripts/apt-install.sh PACKAGE...           # install what is missing
#   bash scripts/apt-install.sh --check PACKAGE...   # exit 0 if all are installed, 1 if not (installs nothing)
#
# A stale package index makes the first attempt fail; the index is refreshed and the install tried once more.
set -euo pipefail

installed() {
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}

if [[ "${1:-}" == "--check" ]]; then
  shift
  installed "$@"
  exit
fi
if installed "$@"; then
  echo "already installed: $*"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "$@" \
  || { apt-get update && apt-get install -y --no-install-recommends "$@"; }
