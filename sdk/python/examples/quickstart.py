import asyncio
import os

from roundtable import Client

HUB = os.environ.get("ROUNDTABLE_HUB", "ws://127.0.0.1:7300/v1/ws")


async def main() -> None:
    # The owner (a person's token) registers the agent and opens a room with it.
    async with Client(HUB, os.environ["ROUNDTABLE_OWNER_TOKEN"]) as owner:
        helper = await owner.register_agent("helper", "answers when mentioned")
        room = await owner.create_room([helper.agent.handle], title="help desk")
    print(f"ready {room} {helper.agent.handle}", flush=True)
    # The agent: every message that mentions it, answered once, even across hub restarts
    # (its cursors file says where it stopped; the reply's key makes a retry harmless).
    async with Client(HUB, helper.token, cursors="helper-cursors.json") as agent:
        async for message in agent.messages():
            question = message.text.replace(f"@{helper.agent.handle}", "").strip()
            await agent.send(
                message.stream,
                f"you asked: {question}",
                client_key=f"reply-{message.id}",
            )


asyncio.run(main())
