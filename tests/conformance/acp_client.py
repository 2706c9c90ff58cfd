"""Drives `agent-tower acp` (the binary given as the first argument, started with the arguments
after it) with the official Python ACP client (PyPI `agent-client-protocol`), over stdio, through
every scenario an editor meets, the last one across a restart of the agent (SIGKILL, then a new
process on the same store).

Fails (an AssertionError, exit code 1) on the first expectation that does not hold; prints one
line per scenario.
"""

import asyncio
import os
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.meta import AGENT_METHODS
from acp.schema import DeleteSessionRequest, DeniedOutcome, RequestPermissionResponse
from acp_editor import Editor, select

BIN, *ARGS = sys.argv[1:]


async def start(conn):
    init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
    assert init.protocol_version == 1, init
    created = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
    return init, created, created.session_id


async def prompt(conn, session_id, words):
    return await conn.prompt(session_id=session_id, prompt=[text_block(words)])


async def streamed_prompt(conn, editor):
    init, created, sid = await start(conn)
    assert init.agent_info.name == "agent-tower"
    assert created.modes.current_mode_id == "ask"
    answer = await prompt(conn, sid, "hello from python")
    assert answer.stop_reason == "end_turn", answer
    assert editor.text() == "You said: hello from python", editor.text()
    assert editor.kinds("session_info_update")


async def tool_allowed_then_rejected(conn, editor):
    _, _, sid = await start(conn)
    answer = await prompt(conn, sid, 'write_document {"document": "one two"}')
    assert answer.stop_reason == "end_turn"
    assert editor.asked == [["allow_once", "allow_always", "reject_once", "reject_always"]], editor.asked
    call = editor.kinds("tool_call")[0]
    assert call["kind"] == "edit" and call["rawInput"]["document"] == "one two", call
    assert len(editor.statuses("completed")) == 1
    assert "saved 2 words" in editor.text()

    editor.answer = lambda request: select("reject_once")
    editor.updates.clear()
    await prompt(conn, sid, 'write_document {"document": "x"}')
    assert len(editor.statuses("failed")) == 1 and not editor.statuses("in_progress")
    assert "declined" in editor.text(), editor.text()


async def allow_always_remembered(conn, editor):
    _, _, sid = await start(conn)
    editor.answer = lambda request: select("allow_always")
    await prompt(conn, sid, 'write_document {"document": "a"}')
    await prompt(conn, sid, 'write_document {"document": "b"}')
    assert len(editor.asked) == 1, editor.asked
    assert len(editor.statuses("completed")) == 2


async def no_late_updates(conn, editor, sid):
    seen = len(editor.updates)
    await conn.set_session_mode(session_id=sid, mode_id="auto")
    late = [
        u for u in editor.updates[seen:] if u["sessionUpdate"] not in ("current_mode_update", "config_option_update")
    ]
    assert late == [], late


async def cancel_while_streaming(conn, editor):
    _, _, sid = await start(conn)
    turn = asyncio.create_task(prompt(conn, sid, "say it slowly"))
    await editor.wait_for(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    await conn.cancel(session_id=sid)
    assert (await turn).stop_reason == "cancelled"
    await no_late_updates(conn, editor, sid)


async def cancel_while_permission_pending(conn, editor):
    _, _, sid = await start(conn)
    decided = asyncio.get_running_loop().create_future()
    asked = asyncio.Event()

    async def wait_for_user(request):
        asked.set()
        return await decided

    editor.answer = wait_for_user
    turn = asyncio.create_task(prompt(conn, sid, 'write_document {"document": "x"}'))
    await asyncio.wait_for(asked.wait(), 20)
    await conn.cancel(session_id=sid)
    assert (await turn).stop_reason == "cancelled"
    # The protocol has the client answer pending requests `cancelled` once it cancelled (here
    # once the turn was answered).
    decided.set_result(RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled")))
    assert len(editor.statuses("failed")) == 1, editor.updates
    await no_late_updates(conn, editor, sid)


async def mode_close_load(conn, editor):
    _, _, sid = await start(conn)
    await conn.set_session_mode(session_id=sid, mode_id="read-only")
    await editor.wait_for(lambda u: u.get("currentModeId") == "read-only")
    await prompt(conn, sid, 'write_document {"document": "x"}')
    assert editor.asked == [], "read-only refuses without asking"
    live = editor.text()
    await conn.close_session(session_id=sid)
    editor.updates.clear()
    loaded = await conn.load_session(cwd=os.getcwd(), session_id=sid, mcp_servers=[])
    assert loaded.modes.current_mode_id == "read-only"
    assert editor.updates[0]["sessionUpdate"] == "user_message_chunk", editor.updates[0]
    assert editor.kinds("tool_call")
    assert editor.text() == live
    # Everything the load sends comes before its answer.
    assert editor.kinds("available_commands_update"), "commands before the answer"


async def new_session_before_initialize_answered(conn, editor):
    # Both sent at once: `session/new` goes out before the answer to `initialize` came.
    init, created = await asyncio.gather(
        conn.initialize(protocol_version=PROTOCOL_VERSION),
        conn.new_session(cwd=os.getcwd(), mcp_servers=[]),
    )
    assert init.protocol_version == 1, init
    assert created.session_id


async def unsupported_version(conn, editor):
    init = await conn.initialize(protocol_version=99)
    assert init.protocol_version == 1, init


SCENARIOS = [
    streamed_prompt,
    tool_allowed_then_rejected,
    allow_always_remembered,
    cancel_while_streaming,
    cancel_while_permission_pending,
    new_session_before_initialize_answered,
    mode_close_load,
    unsupported_version,
]


async def survives_restart():
    editor = Editor()
    async with spawn_agent_process(editor, BIN, "acp", *ARGS) as (conn, process):
        _, _, sid = await start(conn)
        await prompt(conn, sid, "hello before the restart")
        live = editor.text()
        assert "hello before the restart" in live, live
        process.kill()
        await process.wait()
    editor = Editor()
    async with spawn_agent_process(editor, BIN, "acp", *ARGS) as (conn, _process):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(cwd=os.getcwd(), session_id=sid, mcp_servers=[])
        assert editor.updates[0]["sessionUpdate"] == "user_message_chunk", editor.updates[0]
        assert editor.text() == live
        assert editor.kinds("available_commands_update"), "commands before the answer"
        more = await prompt(conn, sid, "and after it")
        assert more.stop_reason == "end_turn", more


async def sessions_listed_resumed_deleted():
    cwd = os.getcwd()
    editor = Editor()
    async with spawn_agent_process(editor, BIN, "acp", *ARGS) as (conn, _process):
        init, _, first = await start(conn)
        caps = init.agent_capabilities.session_capabilities
        assert caps.list is not None and caps.resume is not None, caps
        assert caps.delete is not None and caps.close is not None, caps
        await prompt(conn, first, "python listed first")
        second = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        await prompt(conn, second, "python listed second")
    editor = Editor()
    async with spawn_agent_process(editor, BIN, "acp", *ARGS) as (conn, _process):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        listed = (await conn.list_sessions(cwd=cwd)).sessions
        ids = [s.session_id for s in listed]
        assert ids.index(second) < ids.index(first), "newest first"
        assert listed[ids.index(second)].title == "python listed second"
        await conn.resume_session(session_id=first, cwd=cwd, mcp_servers=[])
        assert not editor.kinds("user_message_chunk"), "no history replayed"
        more = await prompt(conn, first, "resumed")
        assert more.stop_reason == "end_turn", more
        # The client has no method for it: the request as its schema writes it.
        request = DeleteSessionRequest(session_id=second)
        await conn._conn.send_request(
            AGENT_METHODS["session_delete"], request.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        left = [s.session_id for s in (await conn.list_sessions(cwd=cwd)).sessions]
        assert second not in left, left


async def main():
    for scenario in SCENARIOS:
        editor = Editor()
        async with spawn_agent_process(editor, BIN, "acp", *ARGS) as (conn, _process):
            await asyncio.wait_for(scenario(conn, editor), 60)
        print(f"ok - {scenario.__name__}")
    await asyncio.wait_for(survives_restart(), 60)
    print("ok - survives_restart")
    await asyncio.wait_for(sessions_listed_resumed_deleted(), 60)
    print("ok - sessions_listed_resumed_deleted")


asyncio.run(main())
