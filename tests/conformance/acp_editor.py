"""The editor side of the Python ACP client scripts: an editor of the official Python ACP client
(PyPI `agent-client-protocol`) that records the session updates it gets and answers permission
requests with `editor.answer`."""

import asyncio

from acp.schema import AllowedOutcome, RequestPermissionResponse


class Editor:
    """The client side: records updates and answers permission requests with `self.answer`."""

    def __init__(self):
        self.updates = []
        self.asked = []
        self.changed = asyncio.Event()
        self.answer = lambda request: select("allow_once")

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append([o.kind for o in options])
        return await self.answer(tool_call)

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.changed.set()

    async def wait_for(self, test):
        while not any(test(u) for u in self.updates):
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 20)

    def kinds(self, kind):
        return [u for u in self.updates if u["sessionUpdate"] == kind]

    def statuses(self, status):
        return [u for u in self.kinds("tool_call_update") if u.get("status") == status]

    def text(self):
        return "".join(
            u["content"]["text"] for u in self.kinds("agent_message_chunk") if u["content"]["type"] == "text"
        )


async def select(option_id):
    return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option_id))
