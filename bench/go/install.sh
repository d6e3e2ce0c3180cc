#!/usr/bin/env bash
# Installs the Go toolchain the comparisons run against (Debian's golang-go), if `go`
# is not on the PATH yet. The comparison tools skip Go, saying so, without it.
set -euo pipefail
if command -v go >/dev/null 2>&1; then
    go version
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go >/dev/null
go version
