"""An AG-UI agent built on the official Python SDK (PyPI `ag-ui-protocol`: its models and its
`EventEncoder`), on the standard library's HTTP server; stateless, as AG-UI agents are.

    python agui_server.py      # prints `listening on http://127.0.0.1:PORT/`

- `delete <path>`: a `delete_file` tool call that waits for approval (the run ends with an
  interrupt); the resume answers it (`approved`, `feedback`): deleted, or not.
- a message naming a client tool of the input: a call of it, left to the client
  (`pendingToolCallIds`), under the id `call-1` each time when the message says "same id"; after
  its result: "Got <the result>."
- `spend <amount>`: an interrupt without a tool call, "Spend <amount> on ads?", whose answer may
  name the channel to spend it on (`responseSchema`); no `MESSAGES_SNAPSHOT`, so the resume finds
  the amount in the conversation it is posted with, or says it cannot;
- `slowly`: 200 words, one every 50 ms (to cancel);
- anything else: a thought, then "Python says: <the words>", a word at a time.
"""

import json
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ag_ui.core import (
    EventType,
    MessagesSnapshotEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder


def text_of(message):
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    return " ".join(getattr(part, "text", "") for part in content or [])


def run(input: RunAgentInput):
    """The events of one run."""
    ids = {"thread_id": input.thread_id, "run_id": input.run_id}
    yield RunStartedEvent(type=EventType.RUN_STARTED, **ids)

    def say(text, pause=0.0):
        message_id = str(uuid.uuid4())
        yield TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, message_id=message_id, role="assistant")
        for word in text.split(" "):
            time.sleep(pause)
            yield TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id=message_id, delta=word + " ")
        yield TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id=message_id)

    def call(tool_call_id, name, arguments):
        yield ToolCallStartEvent(type=EventType.TOOL_CALL_START, tool_call_id=tool_call_id, tool_call_name=name)
        yield ToolCallArgsEvent(type=EventType.TOOL_CALL_ARGS, tool_call_id=tool_call_id, delta=json.dumps(arguments))
        yield ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id=tool_call_id)

    if input.resume and input.resume[0].interrupt_id.startswith("spend-"):
        # Stateless: what to spend comes from the conversation the resume is posted with.
        entry = input.resume[0]
        payload = entry.payload or {}
        asked = [text_of(m) for m in input.messages if m.role == "user" and text_of(m).startswith("spend ")]
        if not asked:
            yield from say("I do not know what you asked me to spend.")
        elif entry.status != "resolved" or payload.get("approved") is False:
            yield from say(f"Not spending it: {payload.get('feedback', 'cancelled')}")
        else:
            channel = payload.get("channel")
            where = f" on {channel}" if channel else ""
            yield from say(f"Spent {asked[-1].removeprefix('spend ')}{where}.")
        yield RunFinishedEvent(type=EventType.RUN_FINISHED, outcome={"type": "success"}, **ids)
        return

    if input.resume:
        for entry in input.resume:
            payload = entry.payload or {}
            approved = entry.status == "resolved" and payload.get("approved")
            call_id = entry.interrupt_id.removeprefix("interrupt-")
            result = "deleted" if approved else f"not deleted: {payload.get('feedback', '')}"
            yield ToolCallResultEvent(
                type=EventType.TOOL_CALL_RESULT, message_id=str(uuid.uuid4()), tool_call_id=call_id, content=result
            )
            yield from say("Done." if approved else "Left it.")
        yield RunFinishedEvent(type=EventType.RUN_FINISHED, outcome={"type": "success"}, **ids)
        return

    last = input.messages[-1]
    if last.role == "tool":
        yield from say(f"Got {text_of(last)}.")
        yield RunFinishedEvent(type=EventType.RUN_FINISHED, outcome={"type": "success"}, **ids)
        return

    words = text_of(last)
    if words == "slowly":
        yield from say(" ".join(["lorem"] * 200), pause=0.05)
        yield RunFinishedEvent(type=EventType.RUN_FINISHED, outcome={"type": "success"}, **ids)
        return
    if words.startswith("delete "):
        call_id = f"call-{uuid.uuid4()}"
        yield from call(call_id, "delete_file", {"path": words.removeprefix("delete ")})
        yield MessagesSnapshotEvent(type=EventType.MESSAGES_SNAPSHOT, messages=input.messages)
        interrupt = {"id": f"interrupt-{call_id}", "reason": "tool_call", "toolCallId": call_id}
        yield RunFinishedEvent(
            type=EventType.RUN_FINISHED, outcome={"type": "interrupt", "interrupts": [interrupt]}, **ids
        )
        return

    if words.startswith("spend "):
        amount = words.removeprefix("spend ")
        yield from say("That is a lot.")
        interrupt = {
            "id": f"spend-{uuid.uuid4()}",
            "reason": "confirmation",
            "message": f"Spend {amount} on ads?",
            "responseSchema": {
                "type": "object",
                "properties": {"channel": {"type": "string", "title": "Where to spend it"}},
                "required": ["channel"],
            },
        }
        yield RunFinishedEvent(
            type=EventType.RUN_FINISHED, outcome={"type": "interrupt", "interrupts": [interrupt]}, **ids
        )
        return

    tool = next((t for t in input.tools if t.name in words), None)
    if tool:
        # "same id": the id of every such call, as an agent whose counter starts again does.
        call_id = "call-1" if "same id" in words else f"call-{uuid.uuid4()}"
        arguments = json.loads(words[words.index("{") : words.rindex("}") + 1]) if "{" in words else {}
        yield from call(call_id, tool.name, arguments)
        yield RunFinishedEvent(
            type=EventType.RUN_FINISHED, outcome={"type": "success", "pendingToolCallIds": [call_id]}, **ids
        )
        return

    thought = str(uuid.uuid4())
    yield ReasoningMessageStartEvent(type=EventType.REASONING_MESSAGE_START, message_id=thought, role="reasoning")
    yield ReasoningMessageContentEvent(
        type=EventType.REASONING_MESSAGE_CONTENT, message_id=thought, delta="Thinking in Python."
    )
    yield ReasoningMessageEndEvent(type=EventType.REASONING_MESSAGE_END, message_id=thought)
    yield from say(f"Python says: {words}")
    yield RunFinishedEvent(type=EventType.RUN_FINISHED, outcome={"type": "success"}, **ids)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        input = RunAgentInput.model_validate_json(body)
        encoder = EventEncoder(accept=self.headers.get("Accept"))
        self.send_response(200)
        self.send_header("Content-Type", encoder.get_content_type())
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for event in run(input):
                self.wfile.write(encoder.encode(event).encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away: the run stops here

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{server.server_address[1]}/", flush=True)
server.serve_forever()
