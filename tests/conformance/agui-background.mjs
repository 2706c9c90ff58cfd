// A background run: begun with a plain request (`Prefer: respond-async`, as curl would send it),
// answered out of band (an approval), and followed to its end later by the official AG-UI client
// (@ag-ui/client 1.0 HttpAgent, its pipeline and verifier) reading the run's events.
//
//   node agui-background.mjs http://127.0.0.1:PORT/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const url = process.argv[2];
assert.ok(url, "usage: node agui-background.mjs <url>");
const base = url.replace(/\/$/, "");

/** Follows the run at `events` (its events URL) with the official client: the whole run, as the
 * client's pipeline takes it. Returns the events of the checked body. */
async function follow(agent, runId, events) {
  const bodies = [];
  agent.url = `${base}${events}`;
  agent.fetch = tappedFetch(bodies);
  // The run exists: the client reads it (GET) rather than starting one.
  agent.requestInit = () => ({ method: "GET", headers: { Accept: "text/event-stream" } });
  const seen = [];
  await agent.runAgent({ runId }, { onEvent: ({ event }) => void seen.push(event) });
  const wire = checkWire(await bodies[0], { runId, from: 0 });
  assert.deepEqual(seen.map((e) => e.type), wire.map((e) => e.type), "the client saw what was sent");
  return wire;
}

// 1. Begun in the background: 202 at once, where to find it, no stream.
const threadId = randomUUID();
const runId = randomUUID();
const begun = await fetch(base, {
  method: "POST",
  headers: { "Content-Type": "application/json", Prefer: "respond-async" },
  body: JSON.stringify({
    threadId,
    runId,
    messages: [{ id: randomUUID(), role: "user", content: 'remember {"key": "theme", "value": "dark"}' }],
    tools: [],
    context: [],
    state: {},
    forwardedProps: {},
  }),
});
assert.equal(begun.status, 202);
assert.equal(begun.headers.get("location"), `/runs/${runId}`);
assert.match(begun.headers.get("preference-applied") ?? "", /respond-async/);
const started = await begun.json();
assert.deepEqual(started, { threadId, runId, run: `/runs/${runId}`, events: `/runs/${runId}/events` });

// 2. The client follows it later: it stopped at an interrupt, which the client holds.
const agent = new HttpAgent({ url: base, threadId });
const first = await follow(agent, runId, started.events);
assert.equal(first.at(-1).outcome.type, "interrupt");
assert.equal(agent.pendingInterrupts.length, 1, "the client holds the interrupt");
const status = await (await fetch(`${base}${started.run}`)).json();
assert.equal(status.status, "interrupted");
assert.equal(status.pendingInterrupts[0].id, agent.pendingInterrupts[0].id);

// 3. Approved out of band; the run that carries it out is followed to its end by the client.
const resolved = await fetch(`${base}/interrupts/${status.pendingInterrupts[0].id}/resolve`, {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ payload: { approved: true } }),
});
assert.equal(resolved.status, 202);
const answer = await resolved.json();
// (A client holding an interrupt starts no run of its own until it answers: the answer came from
// elsewhere, so the client that reads on holds what the first one saw, and not the interrupt.)
const reader = new HttpAgent({ url: base, threadId, initialMessages: agent.messages, initialState: agent.state });
const second = await follow(reader, answer.runId, answer.events);
assert.equal(second.at(-1).type, "RUN_FINISHED");
assert.equal(second.at(-1).outcome.type, "success");
assert.equal(reader.state.theme, "dark", "the approved call ran: the client's state says so");
const result = second.find((e) => e.type === "TOOL_CALL_RESULT");
assert.equal(result.content, "remembered theme");
assert.ok(reader.messages.some((m) => m.role === "tool" && m.content === "remembered theme"));
console.log("a background run was answered and followed to its end by the official client");
