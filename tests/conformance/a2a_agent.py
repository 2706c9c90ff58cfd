"""An A2A 1.0 agent on the official Python SDK (a2a-sdk 1.3, its Starlette routes), for the
bridge's tests: it echoes in two chunks; asks "Are you sure?" (input required) when told to
confirm, and says what was answered; streams a long answer slowly (to be cancelled); and keeps
the conversation of each context (it says how many messages it has seen there).

    python a2a_agent.py   # prints `listening on PORT`
"""

import asyncio
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState

SEEN: dict[str, int] = {}
CANCELLED: list[str] = []


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        SEEN[task.context_id] = SEEN.get(task.context_id, 0) + 1
        seen = SEEN[task.context_id]
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            said = "Confirmed." if text.strip().lower().startswith("yes") else f"Not confirmed: {text}"
            await updater.add_artifact([Part(text=said)], name="answer")
            await updater.complete()
            return
        await updater.start_work(updater.new_agent_message([Part(text="thinking it over")]))
        if "confirm" in text:
            await updater.requires_input(updater.new_agent_message([Part(text="Are you sure? Answer yes or no.")]))
            return
        if "slowly" in text:
            for i in range(200):
                await updater.add_artifact([Part(text=f"word{i} ")], artifact_id="slow", append=i > 0)
                await asyncio.sleep(0.05)
            await updater.complete()
            return
        await updater.add_artifact([Part(text="You said: ")], artifact_id="echo", name="answer")
        await updater.add_artifact(
            [Part(text=f"{text} (message {seen} of this context)")], artifact_id="echo", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        CANCELLED.append(context.task_id)
        print(f"cancelled {context.task_id}", flush=True)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # Listening before it says so: a connection made at once waits to be accepted.
    sock.listen(64)
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="python-echo",
        description="Echoes, confirms, and answers slowly when asked.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes.", tags=["echo"])],
    )
    handler = DefaultRequestHandlerV2(agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/"))
    print(f"listening on {port}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
