#!/usr/bin/env bash
# Install a PostgreSQL server for the tests marked `postgres` (shared studies and the lease on
# a real database). Debian's `postgresql` package, installed with apt-get when this runs as root;
# nothing happens when the server binaries are already there. The tests never use the package's
# own cluster: each session makes a throwaway one (initdb into a temporary directory, a unix
# socket, pg_ctl start/stop; tunegate.testing.postgres). The last line on stdout is the
# directory of the server binaries; progress goes to stderr.
#
# Environment:
#   TUNEGATE_PG_BIN     a directory holding initdb, pg_ctl and postgres: nothing installed
#   TUNEGATE_NO_APT=1   never apt-get install, even as root
set -euo pipefail

log() { printf 'install_postgres: %s\n' "$*" >&2; }

has_server() { [[ -x "$1/initdb" && -x "$1/pg_ctl" && -x "$1/postgres" ]]; }

find_server() {
    if [[ -n "${TUNEGATE_PG_BIN:-}" ]] && has_server "$TUNEGATE_PG_BIN"; then
        echo "$TUNEGATE_PG_BIN"; return 0
    fi
    local dir
    if command -v initdb >/dev/null 2>&1; then
        dir="$(dirname "$(readlink -f "$(command -v initdb)")")"
        if has_server "$dir"; then echo "$dir"; return 0; fi
    fi
    # Debian keeps the server binaries off PATH, one directory per major version
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
        if has_server "$dir"; then echo "$dir"; return 0; fi
    done
    return 1
}

if find_server; then exit 0; fi
if [[ "${TUNEGATE_NO_APT:-0}" != 1 && "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1
then
    log "installing Debian's postgresql package with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    # The package's post-install script would start a cluster of its own; a policy that
    # forbids starting services keeps it from doing so on a machine without an init system.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && made_policy=1
    fi
    install() { apt-get install -y -qq --no-install-recommends postgresql >&2; }
    install || { apt-get update -qq >&2 && install; } || true
    if [[ "$made_policy" == 1 ]]; then rm -f "$policy"; fi
    find_server && exit 0
fi
log "no PostgreSQL server found and none installed: the postgres tests will be skipped" \
    "(a failure under CI). Install one ('sudo apt-get install -y postgresql') or set" \
    "TUNEGATE_PG_BIN to the directory holding initdb, pg_ctl and postgres."
exit 0
