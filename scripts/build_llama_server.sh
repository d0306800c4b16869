#!/usr/bin/env bash
# Build llama.cpp's `llama-server` portably from the sources the `llama-cpp-python` PyPI package
# ships (vendor/llama.cpp), and cache the binary outside the repository:
#
#     ${TUNEGATE_CACHE:-$HOME/.cache/tunegate}/llama.cpp/<version>/llama-server
#
# Reused when present (the script then exits at once). Unattended: no prompts; the only network
# use is pip fetching the source package from the configured index. The last line on stdout is
# the binary's path; progress goes to stderr.
#
# Environment:
#   LLAMA_CPP_PYTHON_VERSION  source package version (default 0.3.36)
#   TUNEGATE_CACHE            cache root (default $HOME/.cache/tunegate)
#   PYTHON                    interpreter whose pip downloads the sources (default: the repo's
#                             .venv/bin/python when present, else python3)
#   BUILD_JOBS                parallel compile jobs (default 2; CI has 2 cores)
#   TUNEGATE_LLAMA_SERVER     an existing binary to use instead: nothing is built
#   TUNEGATE_NO_APT=1         never apt-get install missing build tools, even as root
#
# Portable on purpose: GGML_NATIVE=OFF (baseline x86-64 AVX2/FMA/F16C; no AVX-512 or AMX). A
# native (-march=native) build crashed with an illegal instruction on these VMs. Tests,
# examples, the web UI (which would download prebuilt assets) and OpenSSL are off; the binary is
# static so it can be moved and cached.
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE_ROOT="${TUNEGATE_CACHE:-$HOME/.cache/tunegate}"
DEST_DIR="$CACHE_ROOT/llama.cpp/$VERSION"
DEST="$DEST_DIR/llama-server"
JOBS="${BUILD_JOBS:-2}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK=""
# Every flag that changes the binary; written next to it, and a cached binary built with other
# flags is rebuilt. CPPHTTPLIB_TCP_NODELAY: llama-server's HTTP library leaves Nagle's algorithm
# on, so streamed tokens are held back until the client ACKs (delayed ACK, up to 40 ms) and
# arrive in bursts; vLLM/SGLang (asyncio) set TCP_NODELAY. Without it TTFT/ITL are distorted.
CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
    "-DCMAKE_CXX_FLAGS=-DCPPHTTPLIB_TCP_NODELAY=true"
)
STAMP="$DEST_DIR/build-flags.txt"

log() { printf 'build_llama_server: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
cleanup() { if [[ -n "$WORK" ]]; then rm -rf "$WORK"; fi; }

ensure_build_tools() {
    local missing=()
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    command -v g++ >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 || missing+=(g++)
    command -v make >/dev/null 2>&1 || missing+=(make)
    (( ${#missing[@]} )) || return 0
    if [[ "${TUNEGATE_NO_APT:-0}" != 1 && "$(id -u)" == 0 ]] \
        && command -v apt-get >/dev/null 2>&1; then
        log "installing missing build tools with apt-get: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 || die "apt-get update failed"
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
            || die "apt-get install ${missing[*]} failed"
        return 0
    fi
    die "missing build tools: ${missing[*]}. Install them (Debian/Ubuntu:" \
        "'sudo apt-get install -y cmake g++ make'; cmake >= 3.14) and run again," \
        "or set TUNEGATE_LLAMA_SERVER to an existing llama-server binary."
}

fetch_sources() {  # prints the llama.cpp source directory
    local sdist src
    log "downloading llama-cpp-python==$VERSION source package with pip"
    "$PYTHON" -m pip download --quiet --no-binary :all: --no-deps --no-input \
        --dest "$WORK" "llama-cpp-python==$VERSION" >&2 \
        || die "pip could not download llama-cpp-python==$VERSION (check" \
               "'pip index versions llama-cpp-python' and set LLAMA_CPP_PYTHON_VERSION)"
    sdist="$(find "$WORK" -maxdepth 1 -name 'llama_cpp_python-*.tar.gz' | head -n 1)"
    [[ -n "$sdist" ]] || die "pip produced no llama_cpp_python-*.tar.gz in $WORK"
    tar -xzf "$sdist" -C "$WORK"
    src="$(find "$WORK" -mindepth 3 -maxdepth 3 -type d -path '*/vendor/llama.cpp' | head -n 1)"
    [[ -n "$src" && -f "$src/CMakeLists.txt" ]] || die "no vendor/llama.cpp tree in $sdist"
    echo "$src"
}

build() {  # $1: source dir; prints the built binary
    local src="$1" built
    log "configuring (portable, static, Release)"
    cmake -S "$src" -B "$WORK/build" "${CMAKE_FLAGS[@]}" >"$WORK/configure.log" 2>&1 \
        || { tail -n 30 "$WORK/configure.log" >&2; die "cmake configure failed"; }
    log "compiling llama-server with $JOBS jobs (about 10 minutes on 2 cores)"
    cmake --build "$WORK/build" --config Release --target llama-server -j "$JOBS" \
        >"$WORK/build.log" 2>&1 \
        || { tail -n 40 "$WORK/build.log" >&2; die "cmake build failed"; }
    built="$(find "$WORK/build" -type f -name llama-server -perm -u+x | head -n 1)"
    [[ -n "$built" ]] || die "the build finished without a llama-server binary"
    "$built" --version >/dev/null 2>&1 || die "the built $built does not run ('--version' failed)"
    echo "$built"
}

main() {
    if [[ -n "${TUNEGATE_LLAMA_SERVER:-}" ]]; then
        [[ -x "$TUNEGATE_LLAMA_SERVER" ]] \
            || die "TUNEGATE_LLAMA_SERVER=$TUNEGATE_LLAMA_SERVER is not an executable file"
        log "using \$TUNEGATE_LLAMA_SERVER; nothing to build"
        echo "$TUNEGATE_LLAMA_SERVER"
        return 0
    fi
    if [[ -x "$DEST" && -f "$STAMP" && "$(cat "$STAMP")" == "${CMAKE_FLAGS[*]}" ]]; then
        log "cached: $DEST"
        echo "$DEST"
        return 0
    fi
    [[ -x "$DEST" ]] && log "cached $DEST was built with other flags; rebuilding"
    ensure_build_tools
    if [[ -z "${PYTHON:-}" ]]; then
        if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then PYTHON="$REPO_ROOT/.venv/bin/python"
        else PYTHON=python3; fi
    fi
    "$PYTHON" -m pip --version >/dev/null 2>&1 \
        || die "'$PYTHON -m pip' does not work; set PYTHON to an interpreter with pip"

    local start=$SECONDS src built
    mkdir -p "$CACHE_ROOT/llama.cpp"
    WORK="$(mktemp -d "$CACHE_ROOT/llama.cpp/build-$VERSION.XXXXXX")"
    trap cleanup EXIT
    src="$(fetch_sources)"
    log "sources ready in $((SECONDS - start)) s: $src"
    built="$(build "$src")"
    mkdir -p "$DEST_DIR"
    cp "$built" "$DEST.tmp.$$"
    mv -f "$DEST.tmp.$$" "$DEST"  # atomic: a concurrent reader never sees half a binary
    printf '%s' "${CMAKE_FLAGS[*]}" >"$STAMP"
    log "built in $((SECONDS - start)) s: $DEST"
    echo "$DEST"
}

# One line, so bash has read all of it before the build starts: editing this file during a
# 10-minute build cannot break the running one.
main "$@"; exit $?
