// The official AG-UI client (@ag-ui/client 1.0 HttpAgent) answers an interrupt raised inside a
// sub-agent through its parent: the lead's run stops with the researcher's interrupt (its
// sub-agent run suspended), the client answers it with its own `buildResumeArray` on another
// instance of the server, the researcher's call runs there and the lead answers.
//
//   node agui-subagent-interrupt.mjs http://A/ http://B/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const [first, second] = process.argv.slice(2);
assert.ok(first && second, "usage: node agui-subagent-interrupt.mjs <url> <url>");

/** One run of `agent` at `url` through the client; returns the events of its checked body. */
async function run(agent, url, params = {}) {
  const bodies = [];
  agent.url = url;
  agent.fetch = tappedFetch(bodies);
  const seen = [];
  await agent.runAgent({ runId: randomUUID(), ...params }, { onEvent: ({ event }) => void seen.push(event) });
  const events = checkWire(await bodies[0]);
  assert.deepEqual(seen.map((e) => e.type), events.map((e) => e.type), "the client saw what was sent");
  return events;
}

const only = (events, type) => {
  const found = events.filter((e) => e.type === type);
  assert.equal(found.length, 1, `one ${type}: ${JSON.stringify(events.map((e) => e.type))}`);
  return found[0];
};

const task = 'remember {"key": "theme", "value": "dark"}';
const agent = new HttpAgent({
  url: first,
  threadId: randomUUID(),
  initialMessages: [{ id: randomUUID(), role: "user", content: `researcher ${JSON.stringify({ task })}` }],
});

// 1. The researcher's call of `remember` waits for a person: the lead's run stops with it.
const stopped = await run(agent, first);
const started = only(stopped, "SUBAGENT_STARTED");
assert.equal(started.name, "researcher");
const sub = started.subagentRunId;
const asked = stopped.find((e) => e.type === "TOOL_CALL_START" && e.toolCallName === "remember");
assert.equal(asked.subagentRunId, sub, "the call is the researcher's");
assert.deepEqual(only(stopped, "SUBAGENT_FINISHED").outcome.type, "suspended");
const finished = stopped.at(-1);
assert.equal(finished.outcome.type, "interrupt");
assert.equal(agent.pendingInterrupts.length, 1, "the client holds the researcher's interrupt");
const [interrupt] = agent.pendingInterrupts;
assert.equal(interrupt.toolCallId, asked.toolCallId);
assert.deepEqual(only(stopped, "SUBAGENT_FINISHED").outcome.interruptIds, [interrupt.id]);
assert.ok(!stopped.some((e) => e.type === "TOOL_CALL_RESULT"), "no call ran");
await assert.rejects(agent.runAgent({ runId: randomUUID() }), /pending interrupt/);
console.log(`ok interrupted inside the sub-agent: ${stopped.length} events`);

// 2. Approved through the parent, on the other instance: the researcher goes on where it stopped.
const resume = buildResumeArray(agent.pendingInterrupts, {
  [interrupt.id]: { status: "resolved", payload: { approved: true } },
});
const answered = await run(agent, second, { resume });
assert.equal(only(answered, "SUBAGENT_STARTED").subagentRunId, sub, "the same sub-agent run");
assert.deepEqual(only(answered, "SUBAGENT_FINISHED").outcome, { type: "success" });
const results = answered.filter((e) => e.type === "TOOL_CALL_RESULT");
const remembered = results.find((e) => e.toolCallId === interrupt.toolCallId);
assert.ok(remembered, "the approved call ran");
assert.equal(remembered.subagentRunId, sub);
assert.equal(remembered.content, "remembered theme");
const delegated = results.find((e) => e.toolCallId === started.parentToolCallId);
assert.ok(delegated, "the lead's call has its result");
assert.equal(delegated.subagentRunId, undefined, "the lead's own");
assert.match(delegated.content, /remembered theme/, "the researcher's answer");
assert.deepEqual(answered.at(-1).outcome, { type: "success" });
assert.deepEqual(agent.pendingInterrupts, [], "nothing is left open");
assert.equal(agent.state.theme, "dark", "the call changed the shared state");
assert.equal(agent.messages.at(-1).role, "assistant", "the lead went on after the result");
console.log(`ok answered through the parent: ${answered.length} events`);
console.log("the sub-agent's interrupt was answered through its parent");
