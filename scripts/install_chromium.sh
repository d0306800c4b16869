#!/usr/bin/env bash
# Install a headless Chromium for the report tests (tests/integration/test_report_browser.py
# opens every kind of HTML report in it). Debian's `chromium` package, installed with apt-get
# when this runs as root; nothing happens when a Chromium is already on PATH. The last line on
# stdout is the browser's path; progress goes to stderr.
#
# Environment:
#   TUNEGATE_CHROMIUM   an existing Chromium or Chrome binary to use instead: nothing installed
#   TUNEGATE_NO_APT=1   never apt-get install, even as root
set -euo pipefail

log() { printf 'install_chromium: %s\n' "$*" >&2; }

find_browser() {
    if [[ -n "${TUNEGATE_CHROMIUM:-}" && -x "${TUNEGATE_CHROMIUM}" ]]; then
        echo "$TUNEGATE_CHROMIUM"; return 0
    fi
    local name
    for name in chromium chromium-browser google-chrome; do
        if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    done
    return 1
}

if find_browser; then exit 0; fi
if [[ "${TUNEGATE_NO_APT:-0}" != 1 && "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1
then
    log "installing Debian's chromium package with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends chromium >&2 \
        || { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends chromium >&2; }
    find_browser && exit 0
fi
log "no Chromium found and none installed: the browser tests will be skipped. Install one" \
    "('sudo apt-get install -y chromium') or set TUNEGATE_CHROMIUM to a Chromium binary."
exit 0
