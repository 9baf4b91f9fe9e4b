"""Prints the cargo configuration CI's Windows build uses: the dependencies built only for
Windows compiled without optimisation (`opt-level = 0`), but those the Windows tests run
hard (SQLite, TLS, the async runtime, hashing, JSON).

Why: the workspace's dev profile optimises every dependency a little (`opt-level = 1`, for
the Linux tests, which run the hub, SQLite and TLS hard), and for the Windows build that
costs about 100 s of CI's time in code generation nobody runs: the app's WebView2 and
windowing stack, the image decoders, the A2A and MCP SDKs, the PostgreSQL and NATS clients
(their tests are skipped under Wine). A package that is also built for the host (build
scripts, proc macros and what they use) keeps the profile Linux's build gave it, or cargo
would build it again: those are left out, as they are found now from `cargo metadata`.

Usage: profile.py > FILE, then `cargo build --config FILE --target x86_64-pc-windows-gnu …`.
"""

import json
import subprocess
import sys

TARGET = "x86_64-pc-windows-gnu"

# Run hard by the Windows tests (the hub's integration suite under Wine): kept optimised.
RUN_HARD = {
    "libsqlite3-sys", "rusqlite", "rustls", "rustls-webpki", "tokio-rustls", "ring",
    "tokio", "tokio-util", "bytes", "mio", "h2", "hyper", "hyper-util", "axum",
    "tungstenite", "tokio-tungstenite", "serde_json", "sha2", "sha1", "argon2", "blake2",
    "base64", "memchr", "hashbrown", "parking_lot", "futures-util", "tracing",
    "libmimalloc-sys", "mimalloc", "flate2", "miniz_oxide",
}


def main() -> int:
    metadata = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", TARGET],
        stdout=subprocess.PIPE, check=True, text=True,
    ).stdout)
    packages = {package["id"]: package for package in metadata["packages"]}
    nodes = {node["id"]: node for node in metadata["resolve"]["nodes"]}
    members = set(metadata["workspace_members"])

    def proc_macro(package_id: str) -> bool:
        return any("proc-macro" in target["kind"] for target in packages[package_id]["targets"])

    # Walk the graph from the workspace's crates: a build dependency or a proc macro, and
    # all below it, is built for the host; the rest (dev-dependencies of the workspace's
    # crates only) for Windows.
    for_windows, for_host = set(), set()
    pending = [(member, False) for member in members]
    seen = set()
    while pending:
        package_id, host = pending.pop()
        if (package_id, host) in seen:
            continue
        seen.add((package_id, host))
        (for_host if host else for_windows).add(packages[package_id]["name"])
        for dependency in nodes[package_id]["deps"]:
            for kind in (k["kind"] for k in dependency["dep_kinds"]):
                if kind == "dev" and (host or package_id not in members):
                    continue
                to_host = host or kind == "build" or proc_macro(dependency["pkg"])
                pending.append((dependency["pkg"], to_host))
    names = {packages[member]["name"] for member in members}
    unoptimised = sorted(for_windows - for_host - names - RUN_HARD)
    for name in unoptimised:
        print(f"[profile.dev.package.{json.dumps(name)}]\nopt-level = 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
