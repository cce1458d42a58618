#!/usr/bin/env bash
# Install the Debian packages provreqd needs to build, test and fuzz.
# Safe to run repeatedly: it installs only what is missing.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      libcurl4-openssl-dev libjson-c-dev libyaml-dev libsqlite3-dev
      libcunit1-dev libssl-dev libmicrohttpd-dev
      clang libclang-rt-14-dev openssl curl ca-certificates git unzip)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
