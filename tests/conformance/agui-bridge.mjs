// The official AG-UI client (@ag-ui/client 1.0 HttpAgent) against `agent-tower serve --agent
// 'acp:…'`: an ACP agent bridged to the web. Every run goes through the client's pipeline (which
// verifies the events) and its raw body is checked as in agui.mjs.
//
//   node agui-bridge.mjs http://127.0.0.1:PORT/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const url = process.argv[2];
assert.ok(url, "usage: node agui-bridge.mjs <url>");

const user = (content) => ({ id: randomUUID(), role: "user", content });

/** One run of `agent`; the events of its checked body. */
async function run(agent, params = {}) {
  const bodies = [];
  agent.fetch = tappedFetch(bodies);
  const runId = randomUUID();
  await agent.runAgent({ ...params, runId });
  return checkWire(await bodies[0], { runId });
}

const thread = (content) => new HttpAgent({ url, threadId: randomUUID(), initialMessages: [user(content)] });
const text = (events) => events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");

// 1. Reasoning, a tool the agent runs itself, and the answer after it: one turn of the agent.
{
  const events = await run(thread('think: add {"a": 2, "b": 40}'));
  const types = events.map((e) => e.type);
  assert.ok(types.includes("REASONING_MESSAGE_CONTENT"), "the agent's thoughts");
  const start = events.find((e) => e.type === "TOOL_CALL_START");
  assert.equal(start.toolCallName, "add");
  assert.deepEqual(JSON.parse(events.find((e) => e.type === "TOOL_CALL_ARGS").delta), { a: 2, b: 40 });
  const result = events.find((e) => e.type === "TOOL_CALL_RESULT");
  assert.equal(result.toolCallId, start.toolCallId);
  assert.equal(result.content, "42");
  assert.equal(text(events), "The `add` tool returned 42.");
  assert.deepEqual(events.at(-1).outcome, { type: "success" });
  console.log(`ok a turn with reasoning and a tool: ${events.length} events`);
}

// 2. The agent's plan: the run's shared state, key `plan`, as the client holds it.
{
  const agent = thread('plan {"entries": [{"content": "write the tests", "status": "pending"}]}');
  const events = await run(agent);
  assert.ok(events.some((e) => e.type === "STATE_DELTA" || e.type === "STATE_SNAPSHOT"), "the plan went out as state");
  assert.deepEqual(
    agent.state.plan.map((e) => [e.content, e.status]),
    [["write the tests", "pending"]],
  );
  console.log("ok the agent's plan in the shared state");
}

// 3. The agent asks permission: an AG-UI interrupt; approved, the agent runs the call.
async function interrupted(content) {
  const agent = thread(content);
  const events = await run(agent);
  assert.equal(events.at(-1).outcome.type, "interrupt");
  assert.ok(!events.some((e) => e.type === "TOOL_CALL_RESULT"), "the call waits");
  const [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.toolCallId, events.find((e) => e.type === "TOOL_CALL_START").toolCallId);
  return { agent, interrupt };
}
async function answered(agent, interrupt, response) {
  const resume = buildResumeArray(agent.pendingInterrupts, { [interrupt.id]: response });
  const events = await run(agent, { resume });
  assert.deepEqual(events.at(-1).outcome, { type: "success" });
  return { result: events.find((e) => e.type === "TOOL_CALL_RESULT"), text: text(events) };
}
{
  const { agent, interrupt } = await interrupted('remember {"key": "theme", "value": "dark"}');
  const { result, text } = await answered(agent, interrupt, { status: "resolved", payload: { approved: true } });
  assert.equal(result.content, "remembered theme");
  assert.equal(text, "The `remember` tool returned remembered theme.");
  console.log("ok permission approved");
}

// 4. Rejected with feedback: the agent is told no, and goes on without the call.
{
  const { agent, interrupt } = await interrupted('remember {"key": "font", "value": "serif"}');
  const { result, text } = await answered(agent, interrupt, {
    status: "resolved",
    payload: { approved: false, feedback: "not now" },
  });
  assert.match(result.content, /not now/);
  assert.match(text, /failed/, "the agent saw the call fail");
  console.log("ok permission rejected");
}

// 5. Edited arguments cannot reach an agent that runs its own tools: refused, said so.
{
  const { agent, interrupt } = await interrupted('remember {"key": "theme", "value": "dark"}');
  const { result } = await answered(agent, interrupt, {
    status: "resolved",
    payload: { approved: true, editedArgs: { key: "theme", value: "light" } },
  });
  assert.match(result.content, /cannot take edited arguments/);
  console.log("ok edited arguments refused");
}

// 6. Stop: the run is cancelled mid-turn (the bridged agent's turn with it); the stream ends
// cancelled and the thread goes on.
{
  const agent = thread("tell me slowly");
  const runId = randomUUID();
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({
      threadId: agent.threadId, runId, messages: agent.messages,
      tools: [], context: [], state: {}, forwardedProps: {}, protocolVersion: "1.0",
    }),
  });
  const reader = response.body.getReader();
  let seen = "";
  while (!seen.includes("TEXT_MESSAGE_CONTENT")) seen += new TextDecoder().decode((await reader.read()).value);
  const stop = await fetch(new URL(`/runs/${runId}/cancel`, url), { method: "POST" });
  assert.equal(stop.status, 202);
  for (let part = await reader.read(); !part.done; part = await reader.read()) {
    seen += new TextDecoder().decode(part.value);
  }
  const ended = JSON.parse(seen.trim().split("\n").filter((l) => l.startsWith("data: ")).at(-1).slice(6));
  assert.deepEqual(ended.outcome, { type: "cancelled" });
  agent.addMessage(user("hello"));
  const events = await run(agent);
  assert.equal(text(events), "You said: hello", "the next turn of the thread runs");
  console.log("ok stopped mid-turn, the thread goes on");
}

console.log("all bridge scenarios passed");
