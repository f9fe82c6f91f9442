#!/usr/bin/env bash
# Install Debian's `chromium` for the HTML report's browser test
# (reports/tests/html_chromium.rs), which opens index.html headless and checks that every
# figure loads and every table renders. Idempotent: does nothing when `chromium` (or the
# binary named by $STRATLAB_CHROMIUM) already runs.
set -euo pipefail

if [[ -n "${STRATLAB_CHROMIUM:-}" ]] && command -v "$STRATLAB_CHROMIUM" > /dev/null; then
    exit 0
fi
if command -v chromium > /dev/null; then
    exit 0
fi

# --no-install-recommends keeps it to the browser itself (no fonts-* or desktop extras);
# the update is needed on fresh containers whose package lists are empty.
install=(bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium')
if [[ "$(id -u)" == 0 ]]; then
    "${install[@]}"
elif command -v sudo > /dev/null; then
    sudo "${install[@]}"
else
    echo "setup-chromium: chromium is not installed and this user is not root and has no sudo;" >&2
    echo "install Debian's 'chromium' package (apt-get install --no-install-recommends chromium)" >&2
    echo "or set STRATLAB_CHROMIUM to a Chromium binary." >&2
    exit 1
fi
command -v chromium > /dev/null || { echo "setup-chromium: apt-get finished but no 'chromium' on PATH" >&2; exit 1; }
