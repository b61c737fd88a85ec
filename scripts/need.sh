#!/usr/bin/env bash
# need.sh installs a Debian package with apt-get when the command a test
# needs is missing, or fails saying how to get it (never skips).
#
# usage: need.sh COMMAND PACKAGE WHY
set -euo pipefail
cmd=$1 pkg=$2 why=$3
command -v "$cmd" >/dev/null && exit 0
echo "installing $pkg: $why"
command -v apt-get >/dev/null || { echo "$cmd is missing and apt-get is not here: install $pkg ($why)" >&2; exit 1; }
sudo=
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { echo "$cmd is missing; as root run: apt-get install -y $pkg" >&2; exit 1; }
	sudo=sudo
fi
$sudo apt-get update -q && $sudo apt-get install -y -q "$pkg" || { echo "could not install $pkg; run: apt-get install -y $pkg" >&2; exit 1; }
command -v "$cmd" >/dev/null || { echo "$cmd is still missing after apt-get install $pkg" >&2; exit 1; }
