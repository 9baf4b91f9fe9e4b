"""Runs the Windows tests of some of the workspace's crates under Wine, from the build that
`cargo build --target x86_64-pc-windows-gnu --workspace --all-targets` made.

Why not `cargo test -p …`: with fewer crates chosen, cargo unifies the dependencies'
features differently and builds many of them again; the whole workspace's build is made once
(it also lints every crate, and holds the app and the CLI the installer packs), and this runs
the test executables of the crates named from it, as `cargo test` would: each in its crate's
directory with `.cargo/config.toml`'s `[env]`, through the target's runner (Wine), with the
arguments given (`--skip …`), every crate's tests even when one fails.

Usage: run_tests.py [--artifacts FILE] CRATE[,CRATE…] [-- TEST-ARGUMENTS…]
A crate given as `CRATE:FILTER[+FILTER…]` runs only its tests whose names hold a filter.
`--artifacts FILE`: the executables are those that build listed (its
`--message-format=json` output) rather than cargo's answer now, so no cargo runs here (CI
checks macOS beside these tests, and cargo locks the build directory while it builds).
"""

import json
import os
import subprocess
import sys
import tomllib

TARGET = "x86_64-pc-windows-gnu"


def configured_environment() -> dict:
    """`.cargo/config.toml`'s `[env]`, which cargo gives the tests it runs."""
    try:
        with open(".cargo/config.toml", "rb") as config:
            variables = tomllib.load(config).get("env", {})
    except FileNotFoundError:
        return {}
    return {
        name: value["value"] if isinstance(value, dict) else value
        for name, value in variables.items()
    }


def run(command: list, directory: str, environment: dict) -> tuple:
    """Runs a test executable, its output passed through. Returns whether it passed (its
    exit status 0 *and* libtest's summary `test result: ok.` printed: a program Wine's
    server takes down with it can exit 0 having run half its tests), and whether Wine's
    server went away under it."""
    process = subprocess.Popen(command, cwd=directory, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace")
    summary, server_lost = False, False
    for line in process.stdout:
        sys.stdout.write(line)
        summary = summary or line.startswith("test result: ok.")
        server_lost = server_lost or "wine client error" in line
    status = process.wait()
    sys.stdout.flush()
    if status == 0 and not summary:
        return False, True
    return status == 0, server_lost


def main() -> int:
    arguments = sys.argv[1:]
    artifacts = None
    if arguments[:1] == ["--artifacts"] and len(arguments) > 1:
        artifacts, arguments = arguments[1], arguments[2:]
    if not arguments:
        print(__doc__, file=sys.stderr)
        return 2
    filters = {}
    for spec in arguments[0].split(","):
        name, _, wanted = spec.partition(":")
        filters[name] = wanted.split("+") if wanted else []
    crates = set(filters)
    arguments = arguments[1:]
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    runner = os.environ.get("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER", "wine").split()
    if artifacts:
        with open(artifacts, encoding="utf-8") as listed:
            lines = listed.read().splitlines()
    else:
        lines = subprocess.run(
            ["cargo", "test", "--locked", "--target", TARGET, "--workspace", "--no-run",
             "--message-format=json"],
            stdout=subprocess.PIPE, check=True, text=True,
        ).stdout.splitlines()
    found = []
    for line in lines:
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        # Tests only, as `cargo test` picks them: not the benches `--all-targets` built.
        if not message["profile"]["test"] or "bench" in message["target"]["kind"]:
            continue
        # `path+file:///…/hub#roundtable-hub@0.1.0`, or `…/protocol#0.1.0` when the folder
        # is the crate's name.
        package = message["package_id"]
        name = package.rsplit("#", 1)[1].split("@")[0]
        if name[:1].isdigit():
            name = package.rsplit("#", 1)[0].rstrip("/").rsplit("/", 1)[1]
        if name in crates:
            found.append((name, os.path.dirname(message["manifest_path"]), message["executable"]))
    missing = crates - {name for name, _, _ in found}
    if missing:
        print(f"no test executables for {', '.join(sorted(missing))}: was the workspace built "
              f"for {TARGET} with --all-targets?", file=sys.stderr)
        return 1
    failed = []
    for name, directory, executable in found:
        print(f"     Running {os.path.relpath(executable)} ({name})", flush=True)
        environment = dict(os.environ, **configured_environment(),
                           CARGO_MANIFEST_DIR=directory, CARGO_PKG_NAME=name)
        command = runner + [executable] + filters[name] + arguments
        passed, server_lost = run(command, directory, environment)
        if not passed and server_lost:
            # Wine's own server died under the executable (seen once under load: `wine
            # client error: recvmsg: Connection reset by peer` before any test ran), or
            # it ended without its summary: not a test's failure. A new server, and the
            # executable once more; a second failure counts.
            print(f"Wine's server went away under {os.path.basename(executable)}: "
                  "starting a new one and running it again", file=sys.stderr, flush=True)
            subprocess.run(["wineserver", "-k"], env=environment, check=False)
            passed, _ = run(command, directory, environment)
        if not passed:
            failed.append(os.path.basename(executable))
    if failed:
        print(f"failed under Wine: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
