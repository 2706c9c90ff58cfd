"""Drives `agent-tower serve`'s `/acp` with the official Python ACP client (PyPI
`agent-client-protocol`, its WebSocket and Streamable HTTP transports), on each binding: a
streamed prompt, an approval asked as a permission and allowed, a cancel while streaming, the
session loaded whole by a second connection, and another principal kept out.

    python acp_remote.py http://127.0.0.1:PORT ALICE_TOKEN BOB_TOKEN

Fails (an AssertionError, exit code 1) on the first expectation that does not hold; prints one
line per scenario and binding.
"""

import asyncio
import contextlib
import sys

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.http import create_http_stream
from acp.ws import create_websocket_stream
from acp_editor import Editor

BASE, ALICE, BOB = sys.argv[1:]
REMEMBER = 'remember {"key": "theme", "value": "dark"}'


@contextlib.asynccontextmanager
async def connected(binding, token, editor):
    """A connection to `/acp` over `binding` as the principal of `token`, initialized."""
    headers = {"Authorization": f"Bearer {token}"}
    if binding == "http":
        transport = create_http_stream(f"{BASE}/acp", headers=headers)
    else:
        transport = await create_websocket_stream(f"{BASE.replace('http', 'ws', 1)}/acp", headers=headers)
    conn = connect_to_agent(editor, transport)
    try:
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert init.protocol_version == 1, init
        yield conn
    finally:
        await conn.close()


async def prompt(conn, session_id, words):
    return await conn.prompt(session_id=session_id, prompt=[text_block(words)])


async def scenarios(binding):
    editor = Editor()
    async with connected(binding, ALICE, editor) as conn:
        session = (await conn.new_session(cwd="/work", mcp_servers=[])).session_id
        answer = await prompt(conn, session, "hello from python")
        assert answer.stop_reason == "end_turn", answer
        assert editor.text() == "You said: hello from python", editor.text()
        print(f"ok - {binding}: a streamed prompt")

        before = len(editor.updates)
        answer = await prompt(conn, session, REMEMBER)
        assert answer.stop_reason == "end_turn", answer
        assert editor.asked == [["allow_once", "allow_always", "reject_once", "reject_always"]], editor.asked
        done = [u for u in editor.updates[before:] if u.get("status") == "completed"]
        assert len(done) == 1, editor.updates[before:]
        print(f"ok - {binding}: an approval asked as a permission, allowed")

        before = len(editor.updates)
        turn = asyncio.ensure_future(prompt(conn, session, "tell me slowly"))
        await editor.wait_for(lambda u: u in editor.updates[before:] and u["sessionUpdate"] == "agent_message_chunk")
        await conn.cancel(session_id=session)
        assert (await turn).stop_reason == "cancelled"
        print(f"ok - {binding}: cancel while streaming")

    editor = Editor()
    async with connected(binding, ALICE, editor) as conn:
        await conn.load_session(cwd="/work", session_id=session, mcp_servers=[])
        # Waits for the replay's last update: once, in CI, over Streamable HTTP, the answer came
        # to the caller before the replayed updates to the editor (not seen in 12 runs here).
        await editor.wait_for(lambda u: u["sessionUpdate"] == "available_commands_update")
        said = [u["content"]["text"] for u in editor.kinds("user_message_chunk")]
        assert said == ["hello from python", REMEMBER, "tell me slowly"], said
        assert editor.text().startswith("You said: hello from python"), editor.text()
        print(f"ok - {binding}: the session loaded whole by a second connection")

    async with connected(binding, BOB, Editor()) as conn:
        try:
            await conn.load_session(cwd="/work", session_id=session, mcp_servers=[])
        except RequestError as error:
            assert error.code == -32002, error
        else:
            raise AssertionError("bob loaded alice's session")
        listed = [s.session_id for s in (await conn.list_sessions()).sessions]
        assert session not in listed, listed
        print(f"ok - {binding}: another principal's session is unknown")


async def main():
    for binding in ("ws", "http"):
        await asyncio.wait_for(scenarios(binding), 60)


asyncio.run(main())
