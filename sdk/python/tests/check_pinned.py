"""Connects to a hub with a certificate of its own: through its pinned address the SDK
authenticates; with another pin it refuses before sending the token. Run by the Rust test
`sdk_python` (arguments: the pinned URL, a URL with another pin, a token)."""

import asyncio
import sys

from roundtable import Client, HubError


async def main(pinned: str, wrong: str, token: str) -> None:
    async with Client(pinned, token) as client:
        assert client.principal is not None
        print(f"authenticated as {client.principal.handle}")
    try:
        async with Client(wrong, token):
            raise SystemExit("a hub with another certificate was trusted")
    except HubError as error:
        assert error.code == "certificate", error
        print("refused another certificate")


asyncio.run(main(*sys.argv[1:4]))
