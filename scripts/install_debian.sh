#!/usr/bin/env bash
# Install the Debian packages listed in binder/apt.txt (the embedded default's recordings, voices,
# ffmpeg) and scripts/apt-test.txt (Chromium for the browser test, Slurm + MUNGE for the Slurm test; not
# on Binder). Uses apt-get as
# root, or sudo when it needs no password; otherwise prints the exact command and fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t pkgs < <(cat binder/apt.txt scripts/apt-test.txt | grep -vE '^\s*(#|$)')
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && { echo "Debian packages: all ${#pkgs[@]} installed"; exit 0; }
echo "Debian packages missing: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then SUDO=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo -n"
else
  echo "ERROR: cannot install them without root. Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
