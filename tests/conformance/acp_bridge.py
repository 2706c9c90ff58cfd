"""Drives `agent-tower acp --agent agui:<url>` (the binary given as the first argument, started
with the arguments after it) with the official Python ACP client (PyPI `agent-client-protocol`):
an AG-UI agent (here `agui_server.py`, on the official Python AG-UI SDK) in an editor.
"""

import asyncio
import os
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, McpServerStdio, RequestPermissionResponse

BIN, *ARGS = sys.argv[1:]
EVERYTHING = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
)


class Editor:
    def __init__(self):
        self.updates = []
        self.asked = []
        self.choice = "allow_once"
        self.changed = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append(tool_call.title)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.choice))

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.changed.set()

    async def wait_for(self, start, kind):
        while not self.since(start, kind):
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 20)

    def since(self, start, kind):
        return [u for u in self.updates[start:] if u["sessionUpdate"] == kind]

    def text(self, start):
        return "".join(u["content"]["text"] for u in self.since(start, "agent_message_chunk"))


async def scenarios(conn, editor):
    init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
    assert init.protocol_version == 1, init

    async def prompt(sid, words):
        start = len(editor.updates)
        answer = await conn.prompt(session_id=sid, prompt=[text_block(words)])
        assert answer.stop_reason == "end_turn", answer
        return start

    sid = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
    start = await prompt(sid, "hello")
    assert editor.since(start, "agent_thought_chunk"), "the agent's thoughts"
    assert editor.text(start).strip() == "Python says: hello", editor.text(start)
    print("ok - a turn with reasoning")

    start = await prompt(sid, "delete notes.txt")
    assert editor.asked == ["delete_file notes.txt"], editor.asked
    done = [u for u in editor.since(start, "tool_call_update") if u.get("status") == "completed"]
    assert done and done[0]["content"][0]["content"]["text"] == "deleted", editor.updates[start:]
    assert editor.text(start).strip() == "Done.", editor.text(start)
    print("ok - an interrupt allowed in the editor")

    editor.choice = "reject_once"
    start = await prompt(sid, "delete notes.txt")
    assert editor.asked == ["delete_file notes.txt"] * 2, editor.asked
    assert editor.text(start).strip() == "Left it.", editor.text(start)
    print("ok - an interrupt rejected in the editor")

    # The session's MCP server lends a tool, offered to the AG-UI agent as a client tool.
    everything = McpServerStdio(name="every thing", command="node", args=[EVERYTHING, "stdio"], env=[])
    sid = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[everything])).session_id
    start = await prompt(sid, 'every_thing__echo {"message": "from python"}')
    done = [u for u in editor.since(start, "tool_call_update") if u.get("status") == "completed"]
    assert done and "Echo: from python" in done[0]["content"][0]["content"]["text"], editor.updates[start:]
    assert editor.text(start).strip() == "Got Echo: from python.", editor.text(start)
    print("ok - an MCP tool of the session as the AG-UI agent's client tool")

    # Cancel while the AG-UI agent streams: the turn ends `cancelled`, the session goes on.
    start = len(editor.updates)
    turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slowly")]))
    await editor.wait_for(start, "agent_message_chunk")
    await conn.cancel(session_id=sid)
    assert (await turn).stop_reason == "cancelled"
    start = await prompt(sid, "hello again")
    assert editor.text(start).strip() == "Python says: hello again", editor.text(start)
    print("ok - cancelled mid-stream, the session goes on")


async def main():
    editor = Editor()
    async with spawn_agent_process(editor, BIN, "acp", *ARGS) as (conn, _process):
        await asyncio.wait_for(scenarios(conn, editor), 60)
    print("all python bridge scenarios passed")


asyncio.run(main())
