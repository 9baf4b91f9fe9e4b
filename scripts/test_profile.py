"""Prints the cargo configuration of CI's builds for one target: the dependencies nothing
runs hard compiled without optimisation (`opt-level = 0`).

Why: the workspace's dev profile optimises every dependency a little (`opt-level = 1`), for
the tests, which run the hub, SQLite, TLS, PostgreSQL's and NATS' clients hard. Most of the
dependency graph is not that: the app's windowing and webview stack (GTK and WebKitGTK's
bindings, WebView2's), Tauri, the image decoders, D-Bus, the A2A and MCP SDKs, the JSON
schema validator and the property-test framework the tests only call a little. Optimising
them is code generation nobody runs: on the 2-core CI machine, about 100 s of the Windows
build and as much of the Linux one (docs/benchmarks.md).

A package that is also built for the host (build scripts, proc macros and what they use)
keeps the workspace's profile: the Linux build, the Windows build and the macOS check
share those, and cargo would build them again for a different profile. They are found now
from `cargo metadata`, so the list follows the dependency graph as it changes.

Usage: test_profile.py TARGET > FILE, then every cargo command of that target's build
gets `--config FILE` (scripts/test.sh).
"""

import json
import subprocess
import sys

# Run hard by the tests on every target (the hub's integration suite, the core's sync and
# the CLI's journeys): kept optimised.
RUN_HARD = {
    # SQLite, the async runtime and the hub's HTTP and WebSocket stack.
    "libsqlite3-sys", "rusqlite", "hashlink", "fallible-iterator",
    "fallible-streaming-iterator", "tokio", "tokio-util", "tokio-stream", "bytes", "mio",
    "socket2", "slab", "futures-util", "futures-core", "futures-channel", "futures-task",
    "h2", "hyper", "hyper-util", "http-body", "http-body-util", "httparse", "axum",
    "axum-core", "matchit", "tower", "tower-http", "tungstenite", "tokio-tungstenite",
    # TLS and the hashes, keys and random numbers behind tokens and logins.
    "rustls", "rustls-webpki", "rustls-pki-types", "tokio-rustls", "ring", "untrusted",
    "sha2", "sha1", "argon2", "blake2", "hmac", "rand", "rand_chacha", "ppv-lite86",
    "zerocopy",
    # Serialisation, logging, memory.
    "serde_json", "ryu", "base64", "memchr", "hashbrown", "ahash", "parking_lot",
    "tracing", "tracing-core", "tracing-subscriber", "sharded-slab", "thread_local",
    "crossbeam-utils", "crossbeam-channel", "libmimalloc-sys", "mimalloc", "flate2",
    "miniz_oxide",
}

# Run hard where the tests run PostgreSQL and NATS: the hub's suite on both (their
# tests are skipped under Wine, whose programs cannot reach the tests' servers).
RUN_HARD_WHERE_THEIR_SERVERS_RUN = {
    "tokio-postgres", "postgres-protocol", "postgres-types", "tokio-postgres-rustls",
    "deadpool", "deadpool-postgres", "deadpool-runtime", "md-5", "stringprep",
    "async-nats", "nuid", "portable-atomic",
}


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: test_profile.py TARGET (e.g. x86_64-pc-windows-gnu)", file=sys.stderr)
        return 2
    target = sys.argv[1]
    run_hard = RUN_HARD | (set() if "windows" in target else RUN_HARD_WHERE_THEIR_SERVERS_RUN)
    metadata = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", target],
        stdout=subprocess.PIPE, check=True, text=True,
    ).stdout)
    packages = {package["id"]: package for package in metadata["packages"]}
    nodes = {node["id"]: node for node in metadata["resolve"]["nodes"]}
    members = set(metadata["workspace_members"])

    def proc_macro(package_id: str) -> bool:
        return any("proc-macro" in target["kind"] for target in packages[package_id]["targets"])

    # Walk the graph from the workspace's crates: a build dependency or a proc macro, and
    # all below it, is built for the host; the rest (dev-dependencies of the workspace's
    # crates only) for the target.
    for_target, for_host = set(), set()
    pending = [(member, False) for member in members]
    seen = set()
    while pending:
        package_id, host = pending.pop()
        if (package_id, host) in seen:
            continue
        seen.add((package_id, host))
        (for_host if host else for_target).add(packages[package_id]["name"])
        for dependency in nodes[package_id]["deps"]:
            for kind in (k["kind"] for k in dependency["dep_kinds"]):
                if kind == "dev" and (host or package_id not in members):
                    continue
                to_host = host or kind == "build" or proc_macro(dependency["pkg"])
                pending.append((dependency["pkg"], to_host))
    names = {packages[member]["name"] for member in members}
    unoptimised = sorted(for_target - for_host - names - run_hard)
    for name in unoptimised:
        print(f"[profile.dev.package.{json.dumps(name)}]\nopt-level = 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
