"""Drives `agent-tower acp --agent agui:<url>` (the binary given as the first argument, started
with the arguments after it) with the official Python ACP client (PyPI `agent-client-protocol`):
an AG-UI agent (here `agui_server.py`, on the official Python AG-UI SDK) in an editor.
"""

import asyncio
import os
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    McpServerStdio,
    RequestPermissionResponse,
)

BIN, *ARGS = sys.argv[1:]
EVERYTHING = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
)


class Editor:
    def __init__(self):
        self.updates = []
        self.asked = []
        self.options = []
        self.forms = []
        self.choice = "allow_once"
        self.changed = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append(tool_call.title)
        self.options.append([o.option_id for o in options])
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.choice))

    async def create_elicitation(self, message, mode, **kwargs):
        self.forms.append((message, list(mode.requested_schema.properties)))
        return AcceptElicitationResponse(action="accept", content={"channel": "radio"})

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

    # An interrupt without a tool call is a question in the editor, never answered for the person;
    # the stateless AG-UI agent resumes with the conversation the bridge holds.
    editor.choice = "allow_once"
    start = await prompt(sid, "spend $500")
    assert editor.asked[-1] == "Spend $500 on ads?", editor.asked
    assert editor.options[-1] == ["allow_once", "reject_once"], editor.options
    asked = [u for u in editor.since(start, "tool_call") if u["title"] == "Spend $500 on ads?"]
    assert asked, editor.updates[start:]
    assert editor.text(start).strip() == "That is a lot. Spent $500.", editor.text(start)
    editor.choice = "reject_once"
    start = await prompt(sid, "spend $900")
    said = editor.text(start).strip()
    assert said == "That is a lot. Not spending it: the user said no in the editor", said
    editor.choice = "allow_once"
    print("ok - an interrupt without a tool call asked in the editor, resumed with the conversation")

    # The session's MCP server lends a tool, offered to the AG-UI agent as a client tool.
    everything = McpServerStdio(name="every thing", command="node", args=[EVERYTHING, "stdio"], env=[])
    sid = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[everything])).session_id
    start = await prompt(sid, 'every_thing__echo {"message": "from python"}')
    done = [u for u in editor.since(start, "tool_call_update") if u.get("status") == "completed"]
    assert done and "Echo: from python" in done[0]["content"][0]["content"]["text"], editor.updates[start:]
    assert editor.text(start).strip() == "Got Echo: from python.", editor.text(start)
    print("ok - an MCP tool of the session as the AG-UI agent's client tool")

    # An AG-UI agent that calls under the same id in every turn: each call is its own.
    for word in ["one", "two"]:
        start = await prompt(sid, 'every_thing__echo {"message": "%s"} same id' % word)
        done = [u for u in editor.since(start, "tool_call_update") if u.get("status") == "completed"]
        assert len(done) == 1 and f"Echo: {word}" in done[0]["content"][0]["content"]["text"], editor.updates[start:]
        assert editor.text(start).strip() == f"Got Echo: {word}.", editor.text(start)
    print("ok - a call id the AG-UI agent used before is a new call")

    # Cancel while the AG-UI agent streams: the turn ends `cancelled`, the session goes on.
    start = len(editor.updates)
    turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slowly")]))
    await editor.wait_for(start, "agent_message_chunk")
    await conn.cancel(session_id=sid)
    assert (await turn).stop_reason == "cancelled"
    start = await prompt(sid, "hello again")
    assert editor.text(start).strip() == "Python says: hello again", editor.text(start)
    print("ok - cancelled mid-stream, the session goes on")


async def forms(conn, editor):
    """An editor that shows forms answers an interrupt's question in one."""
    forms = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
    await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=forms)
    sid = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
    start = len(editor.updates)
    answer = await conn.prompt(session_id=sid, prompt=[text_block("spend $300")])
    assert answer.stop_reason == "end_turn", answer
    assert editor.forms == [("Spend $300 on ads?", ["channel"])], editor.forms
    assert editor.asked == [], "asked in a form, not as a permission"
    assert editor.text(start).strip() == "That is a lot. Spent $300 on radio.", editor.text(start)
    print("ok - an interrupt's question answered in the editor's form")


async def main():
    editor = Editor()
    async with spawn_agent_process(editor, BIN, "acp", *ARGS) as (conn, _process):
        await asyncio.wait_for(scenarios(conn, editor), 60)
    editor = Editor()
    # This SDK routes `elicitation/create` only with its unstable methods on.
    async with spawn_agent_process(editor, BIN, "acp", *ARGS, use_unstable_protocol=True) as (conn, _process):
        await asyncio.wait_for(forms(conn, editor), 60)
    print("all python bridge scenarios passed")


asyncio.run(main())
