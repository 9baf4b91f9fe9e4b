# Shared by scripts/run.sh and scripts/test.sh: install what is missing, idempotently.

# Debian packages the build and the tests need.
ensure_packages() {
    local missing=()
    local package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done
    if ((${#missing[@]})); then
        echo "installing: ${missing[*]}" >&2
        local sudo=()
        [ "$(id -u)" -eq 0 ] || sudo=(sudo)
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

ensure_rust() {
    if ! command -v cargo >/dev/null; then
        echo "cargo is missing: install Rust from https://rustup.rs (rustup default stable), then run this again" >&2
        exit 1
    fi
}

# The Python the tests drive agents with: the official MCP client (PyPI `mcp`), in a virtual
# environment under target/ so nothing is installed system-wide.
ensure_test_python() {
    local venv=target/python
    if ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
        echo "installing the MCP client for the tests into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check 'mcp==2.3.*'
    fi
    export ROUNDTABLE_TEST_PYTHON="$PWD/$venv/bin/python"
}

# ccusage, the reference the usage tests compare with (npm; its native build for Linux).
ensure_test_ccusage() {
    local prefix=target/node
    if [ ! -x "$prefix/node_modules/.bin/ccusage" ]; then
        echo "installing ccusage 20.0.24 for the tests into $prefix" >&2
        mkdir -p "$prefix"
        npm install --prefix "$prefix" --no-audit --no-fund --silent \
            ccusage@20.0.24 @ccusage/ccusage-linux-x64@20.0.24 >/dev/null
    fi
    export ROUNDTABLE_TEST_CCUSAGE="$PWD/$prefix/node_modules/.bin/ccusage"
}
