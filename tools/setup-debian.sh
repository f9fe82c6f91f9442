#!/usr/bin/env bash
# Install the Debian packages the build and tests need, when missing; idempotent.
#   libgloo-dev  gloo's headers, which libtorch's ProcessGroupGloo.hpp includes: the c10d
#                shim (comm/cpp/c10d_shim.cpp) compiles against them.
#   iproute2     `ip netns` / veth for the two-namespace (multi-node) launch test.
# Usage: tools/setup-debian.sh <package>...   (all of the above when none is named)
set -euo pipefail

packages=("$@")
[[ ${#packages[@]} -gt 0 ]] || packages=(libgloo-dev iproute2)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q "install ok installed" || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

# --no-install-recommends keeps it to what is named; the update is needed on fresh
# containers whose package lists are empty.
install=(bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${missing[*]}")
if [[ "$(id -u)" == 0 ]]; then
    "${install[@]}"
elif command -v sudo > /dev/null; then
    sudo "${install[@]}"
else
    echo "setup-debian: ${missing[*]} not installed, and this user is not root and has no sudo;" >&2
    echo "install them with: apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
