"""A remote A2A agent for the outbound tests, built on the official server (a2a-sdk 1.3.0,
its JSON-RPC routes and in-memory task store, under uvicorn).

It echoes a message as an artifact (`echo: <text>`); a text with `?` first asks
"which one?" (INPUT_REQUIRED), and the answer to that completes the task with it.
Every request's headers and every message it is given are appended to LOG as JSON lines,
so a test can tell what left the hub. Prints its port once it listens.

Usage: a2a_echo_server.py LOG [PORT]
"""

import asyncio
import json
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState

LOG = sys.argv[1]


def record(entry: dict) -> None:
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        continuing = context.current_task is not None
        record(
            {
                "message": text,
                "task_id": context.task_id,
                "context_id": context.context_id,
                "message_task_id": context.message.task_id if context.message else "",
                "message_id": context.message.message_id if context.message else "",
                "continuing": continuing,
            }
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if not continuing:
            await event_queue.enqueue_event(
                new_task(
                    context.task_id,
                    context.context_id,
                    TaskState.TASK_STATE_SUBMITTED,
                    history=[context.message],
                )
            )
        if not continuing and "?" in text:
            await updater.requires_input(
                new_text_message(
                    "which one?", context_id=context.context_id, task_id=context.task_id
                )
            )
            return
        await updater.add_artifact([new_text_part(f"echo: {text}")], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class RecordHeaders:
    """ASGI middleware: every HTTP request's headers go to the log."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            record(
                {
                    "path": scope["path"],
                    "headers": {
                        name.decode("latin-1"): value.decode("latin-1")
                        for name, value in scope["headers"]
                    },
                }
            )
        await self.app(scope, receive, send)


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0))
    port = sock.getsockname()[1]
    card = AgentCard(
        name="echo",
        description="echoes what it is sent",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"http://127.0.0.1:{port}/",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, rpc_url="/"),
        ]
    )
    server = uvicorn.Server(
        uvicorn.Config(RecordHeaders(app), log_level="warning", lifespan="off")
    )
    print(port, flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
