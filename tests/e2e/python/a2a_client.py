"""Drives a Roundtable agent's A2A endpoint with the official A2A Python client (a2a-sdk).

Usage: a2a_client.py HUB_URL OWNER/NAME TOKEN STEP [ARGS...]; prints one JSON object.

Steps:
  card                         the card the SDK resolved, as JSON
  stream MESSAGE_ID TEXT       SendStreamingMessage: every update, in order
  block MESSAGE_ID TEXT        SendMessage, blocking: the task it returns
  block-within SECONDS MESSAGE_ID TEXT  the same, giving up after SECONDS without a byte
                               (httpx's read timeout)
  submit MESSAGE_ID TEXT       SendMessage with returnImmediately: the task
  reply TASK_ID MESSAGE_ID TEXT  a follow-up in a task (streaming): every update
  get TASK_ID                  GetTask
  list                         ListTasks, page by page: the ids
  cancel TASK_ID               CancelTask
  subscribe TASK_ID            SubscribeToTask: every update until the stream ends (a line
                               {"attached": true} once the first one came)
  errors                       what push configs, an unknown task and a file part get (the
                               SDK asks for no extended card: the card says there is none)
"""

import asyncio
import json
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict


def state(value) -> str:
    return TaskState.Name(value)


def update(event) -> dict:
    """One StreamResponse, as the test reads it."""
    kind = event.WhichOneof("payload")
    if kind == "task":
        return {"kind": "task", "id": event.task.id, "context": event.task.context_id,
                "state": state(event.task.status.state),
                "text": " ".join(part.text for part in event.task.status.message.parts),
                "artifacts": [" ".join(part.text for part in a.parts)
                              for a in event.task.artifacts]}
    if kind == "status_update":
        status = event.status_update.status
        text = " ".join(part.text for part in status.message.parts) if status.HasField("message") else ""
        return {"kind": "status", "state": state(status.state), "text": text}
    if kind == "artifact_update":
        text = " ".join(part.text for part in event.artifact_update.artifact.parts)
        return {"kind": "artifact", "text": text}
    return {"kind": kind}


def task_summary(task) -> dict:
    return {
        "id": task.id,
        "context": task.context_id,
        "state": state(task.status.state),
        "status_text": " ".join(part.text for part in task.status.message.parts),
        "artifacts": [" ".join(part.text for part in a.parts) for a in task.artifacts],
        "history": [MessageToDict(m)["role"] for m in task.history],
    }


def message(message_id: str, text: str, task_id: str = "", context: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)],
                        task_id=task_id, context_id=context),
    )


def error_name(error: BaseException) -> str:
    return type(error).__name__


async def main() -> None:
    hub, handle, token, step, *args = sys.argv[1:]
    base = f"{hub}/a2a/{handle}"
    timeout = 60.0
    if step == "block-within":
        timeout, *args = float(args[0]), *args[1:]
        step = "block"
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    streaming = step in ("stream", "reply", "subscribe")
    try:
        client = await create_client(base, ClientConfig(httpx_client=http, streaming=streaming))
    except Exception as error:  # noqa: BLE001 - a refused card: the test reads the type
        print(json.dumps({"error": error_name(error), "detail": str(error)}), flush=True)
        await http.aclose()
        return
    out: dict = {}
    try:
        if step == "card":
            # The SDK's own resolver, without a token: a public agent's card is anyone's.
            async with httpx.AsyncClient() as anonymous:
                card = await A2ACardResolver(anonymous, base).get_agent_card()
            out = MessageToDict(card)
        elif step in ("stream", "reply"):
            if step == "stream":
                request = message(args[0], args[1])
            else:
                request = message(args[1], args[2], task_id=args[0])
            out = {"updates": [update(event) async for event in client.send_message(request)]}
        elif step in ("block", "submit"):
            request = message(args[0], args[1])
            if step == "submit":
                request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
            events = [event async for event in client.send_message(request)]
            out = task_summary(events[-1].task)
        elif step == "get":
            out = task_summary(await client.get_task(GetTaskRequest(id=args[0])))
        elif step == "list":
            ids, token_ = [], ""
            while True:
                page = await client.list_tasks(ListTasksRequest(page_size=2, page_token=token_))
                ids += [task.id for task in page.tasks]
                token_ = page.next_page_token
                if not token_:
                    break
            out = {"ids": ids}
        elif step == "cancel":
            out = task_summary(await client.cancel_task(CancelTaskRequest(id=args[0])))
        elif step == "subscribe":
            # A line once the stream is open (its first update, the task as it is), so a
            # test can go on knowing the subscription is there; the summary last.
            updates = []
            async for event in client.subscribe(SubscribeToTaskRequest(id=args[0])):
                updates.append(update(event))
                if len(updates) == 1:
                    print(json.dumps({"attached": True}), flush=True)
            out = {"updates": updates}
        elif step == "errors":
            attempts = {
                "push": client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id="r_x.1", url="https://example.com/hook")),
                "unknown_task": client.get_task(GetTaskRequest(id="r_nothing.1")),
            }
            for name, call in attempts.items():
                try:
                    await call
                    out[name] = "ok"
                except Exception as error:  # noqa: BLE001 - the error's type is the answer
                    out[name] = error_name(error)
            file_part = SendMessageRequest(message=Message(
                message_id="file-1", role=Role.ROLE_USER,
                parts=[Part(url="https://example.com/a.png", media_type="image/png")]))
            try:
                [event async for event in client.send_message(file_part)]
                out["file"] = "ok"
            except Exception as error:  # noqa: BLE001
                out["file"] = error_name(error)
        else:
            raise SystemExit(f"unknown step {step}")
    except Exception as error:  # noqa: BLE001 - the test reads the error's type
        out = {"error": error_name(error), "detail": str(error)}
    finally:
        await client.close()
        await http.aclose()
    print(json.dumps(out), flush=True)


asyncio.run(main())
