#!/usr/bin/env bash
# Install the Debian packages provreqd needs to build, test and fuzz.
# Safe to run repeatedly: it installs only what is missing.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      libcurl4-openssl-dev libjson-c-dev libyaml-dev libsqlite3-dev
      libcunit1-dev libssl-dev libmicrohttpd-dev
      clang libclang-rt-14-dev openssl curl ca-certificates git unzip
      jq python3
      podman runc)
# jq: make image; python3: e2e scenarios. podman (with runc, which
# Debian's podman would otherwise replace by crun): the e2e image scenario
# (52-deploy-image), which writes its own containers.conf and storage.conf
# and changes nothing of the machine's podman setup.
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
