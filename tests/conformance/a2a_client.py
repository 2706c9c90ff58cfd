"""The official A2A Python client (a2a-sdk 1.3, A2A 1.0) against agent-tower's A2A door, on
both bindings: the card, a streamed answer, an approval declined with feedback (the call did not
run, the agent read why), the caller's tasks listed, a task cancelled.

    python a2a_client.py http://127.0.0.1:PORT ALICE_TOKEN BOB_TOKEN
"""

import asyncio
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)


def message(text, task_id="", context_id=""):
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def client(base, token, binding):
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    config = ClientConfig(httpx_client=http, supported_protocol_bindings=[binding])
    return await ClientFactory(config).create_from_url(base), http


async def stream(a2a, msg):
    """Every update of a streamed message, in order."""
    return [update async for update in a2a.send_message(SendMessageRequest(message=msg))]


def state_of(update):
    kind = update.WhichOneof("payload")
    if kind == "task":
        return update.task.status.state
    if kind == "status_update":
        return update.status_update.status.state
    return None


async def main(base, alice, bob):
    async with httpx.AsyncClient() as plain:
        card = (await plain.get(f"{base}/.well-known/agent-card.json")).json()
    assert {i["protocolBinding"] for i in card["supportedInterfaces"]} == {"JSONRPC", "HTTP+JSON"}

    for binding in ["JSONRPC", "HTTP+JSON"]:
        a2a, http = await client(base, alice, binding)

        updates = await stream(a2a, message("hello from python"))
        assert updates[0].WhichOneof("payload") == "task", updates
        assert state_of(updates[-1]) == TaskState.TASK_STATE_COMPLETED, updates[-1]
        task_id = updates[0].task.id
        task = await a2a.get_task(GetTaskRequest(id=task_id))
        answer = "".join(p.text for a in task.artifacts for p in a.parts)
        assert "hello from python" in answer, answer
        print(f"ok {binding}: a streamed answer: {answer!r}")

        asked = await stream(a2a, message('remember {"key": "theme", "value": "dark"}'))
        assert state_of(asked[-1]) == TaskState.TASK_STATE_INPUT_REQUIRED, asked[-1]
        waiting = asked[0].task
        declined = await stream(a2a, message("no, not today", waiting.id, waiting.context_id))
        assert state_of(declined[-1]) == TaskState.TASK_STATE_COMPLETED, declined[-1]
        thread = (await http.get(f"{base}/threads/{waiting.context_id}")).json()
        assert (thread.get("state") or {}).get("theme") is None, "the declined call did not run"
        tool = next(m for m in thread["messages"] if m["role"] == "tool")
        assert "not today" in tool["content"], tool
        print(f"ok {binding}: an approval declined with feedback; the call did not run")

        page = await a2a.list_tasks(ListTasksRequest(page_size=1))
        assert len(page.tasks) == 1 and page.next_page_token, page
        after = await a2a.list_tasks(ListTasksRequest(page_size=1, page_token=page.next_page_token))
        assert after.tasks[0].id != page.tasks[0].id, "the next page goes on"
        newer, older = page.tasks[0].status.timestamp, after.tasks[0].status.timestamp
        assert newer.ToDatetime() >= older.ToDatetime(), "the most recently changed first"
        bobs, bob_http = await client(base, bob, binding)
        theirs = await bobs.list_tasks(ListTasksRequest(page_size=100))
        assert all(t.id not in {task_id, waiting.id} for t in theirs.tasks)
        print(f"ok {binding}: listed newest first; bob lists none of alice's")

        slow = await a2a.send_message(
            SendMessageRequest(message=message("answer slowly please"))
        ).__anext__()
        cancelled = await a2a.cancel_task(CancelTaskRequest(id=slow.task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        print(f"ok {binding}: a streamed task cancelled")
        for c, h in [(a2a, http), (bobs, bob_http)]:
            await c.close()
            await h.aclose()
    print("a2a-python: passed")


asyncio.run(main(*sys.argv[1:4]))
