// Two tabs on one thread through the official AG-UI client (@ag-ui/client HttpAgent): the first
// sends "one", the second copies the conversation, the first sends "two", and the second, stale,
// sends "three". Prints, as JSON, the `RUN_ERROR` the stale tab got, the conversation it shows
// after it, its conversation after sending "three" again, and the thread the server kept.
//
//   node agui-stale-tab.mjs http://127.0.0.1:PORT
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const [base] = process.argv.slice(2);
assert.ok(base, "usage: node agui-stale-tab.mjs <base>");
const threadId = randomUUID();
const said = (messages) => messages.map((m) => [m.role, m.content]);
const send = async (tab, words) => {
  tab.addMessage({ id: randomUUID(), role: "user", content: words });
  let error;
  await tab.runAgent({}, { onRunErrorEvent: ({ event }) => void (error = event) });
  return error;
};

const first = new HttpAgent({ url: `${base}/`, threadId });
await send(first, "one");
const second = new HttpAgent({ url: `${base}/`, threadId, initialMessages: first.messages });
await send(first, "two");
const error = await send(second, "three");
const refreshed = said(second.messages);
const again = await send(second, "three");
const stored = await (await fetch(`${base}/threads/${threadId}`)).json();
console.log(
  JSON.stringify({
    error: error && { code: error.code, message: error.message },
    refreshed,
    again: again?.code ?? null,
    shown: said(second.messages),
    stored: said(stored.messages),
  }),
);
