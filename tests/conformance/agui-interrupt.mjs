// The official AG-UI client (@ag-ui/client 1.0 HttpAgent) through the interrupt flow of an
// agent-tower server in durable mode: a run ends with an interrupt outcome, the client refuses to
// go on without answering it, and the next run carries `resume[]` built by the client's own
// `buildResumeArray`.
//
//   node agui-interrupt.mjs http://127.0.0.1:PORT/
//
// Every run goes through HttpAgent's pipeline (which enforces and verifies the events); the raw
// bodies are checked as in agui.mjs, with their `id: <runId>:<seq>` lines.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent, buildResumeArray, isInterruptExpired } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const url = process.argv[2];
assert.ok(url, "usage: node agui-interrupt.mjs <url>");

const user = (content) => ({ id: randomUUID(), role: "user", content });

/**
 * One run of `agent` through the client; returns the events of its checked body, numbered after
 * `from` (a run continued under its own id goes on where it stopped).
 */
async function run(agent, params = {}, from = 0) {
  const bodies = [];
  agent.fetch = tappedFetch(bodies);
  const runId = params.runId ?? randomUUID();
  const seen = [];
  await agent.runAgent({ ...params, runId }, { onEvent: ({ event }) => void seen.push(event) });
  const events = checkWire(await bodies[0], { runId, from });
  assert.deepEqual(seen.map((e) => e.type), events.map((e) => e.type), "the client saw what was sent");
  return events;
}

/** A run that asks to call `remember`, which needs approval: it ends interrupted. */
async function interrupted(name) {
  const agent = new HttpAgent({
    url,
    threadId: randomUUID(),
    initialMessages: [user('remember {"key": "theme", "value": "dark"}')],
  });
  const events = await run(agent);
  const finished = events.at(-1);
  assert.equal(finished.type, "RUN_FINISHED");
  assert.equal(finished.outcome.type, "interrupt");
  assert.equal(agent.pendingInterrupts.length, 1, "the client holds the open interrupt");
  const [interrupt] = agent.pendingInterrupts;
  const start = events.find((e) => e.type === "TOOL_CALL_START");
  assert.equal(interrupt.reason, "tool_call");
  assert.equal(interrupt.toolCallId, start.toolCallId);
  assert.equal(start.toolCallName, "remember");
  assert.equal(interrupt.responseSchema.type, "object");
  assert.ok(interrupt.expiresAt && !isInterruptExpired(interrupt), "it can still be answered");
  assert.ok(!events.some((e) => e.type === "TOOL_CALL_RESULT"), "the call did not run");
  const types = events.map((e) => e.type);
  assert.ok(types.includes("MESSAGES_SNAPSHOT"), "the conversation is sent before the interrupt");
  console.log(`ok ${name}, interrupted: ${events.length} events`);
  return { agent, interrupt, runId: finished.runId, events };
}

/**
 * The run that answers `interrupt` with `response` (under `runId`, when given, after `from`);
 * returns its events and the call's result.
 */
async function resumed(name, agent, interrupt, response, { runId, from = 0 } = {}) {
  const resume = buildResumeArray(agent.pendingInterrupts, { [interrupt.id]: response });
  const params = { runId, resume, forwardedProps: { agui: { stateSnapshots: "final" } } };
  const events = await run(agent, params, from);
  assert.equal(events[0].type, "RUN_STARTED");
  if (runId) assert.equal(events[0].runId, runId, "the continuation runs under the id sent");
  assert.deepEqual(events.at(-1).outcome, { type: "success" });
  assert.deepEqual(agent.pendingInterrupts, [], "nothing is left open");
  const result = events.find((e) => e.type === "TOOL_CALL_RESULT");
  assert.ok(result, "the answered call has its result");
  assert.equal(result.toolCallId, interrupt.toolCallId, "under the interrupted call's id");
  const toolMessage = agent.messages.find((m) => m.role === "tool");
  assert.equal(toolMessage.toolCallId, interrupt.toolCallId);
  assert.equal(agent.messages.at(-1).role, "assistant", "the model went on after the result");
  console.log(`ok ${name}, resumed: ${events.length} events`);
  return { events, result };
}

// 1. Approved with edited arguments; the client cannot skip the answer.
{
  const { agent, interrupt } = await interrupted("edit");
  await assert.rejects(agent.runAgent({ runId: randomUUID() }), /pending interrupt/);
  const { result } = await resumed("edit", agent, interrupt, {
    status: "resolved",
    payload: { approved: true, editedArgs: { key: "theme", value: "light" } },
  });
  assert.equal(result.content, "remembered theme");
  assert.equal(agent.state.theme, "light", "the edited arguments ran");
}

// 2. Rejected with feedback: the feedback is the call's result, read by the model.
{
  const { agent, interrupt } = await interrupted("reject");
  const { result } = await resumed("reject", agent, interrupt, {
    status: "resolved",
    payload: { approved: false, feedback: "keep the light theme" },
  });
  assert.match(result.content, /keep the light theme/);
  assert.equal(agent.state.theme, undefined, "the call did not run");
}

// 3. Dismissed: `cancelled` closes the interrupt; the call is not run.
{
  const { agent, interrupt } = await interrupted("cancel");
  const { result } = await resumed("cancel", agent, interrupt, { status: "cancelled" });
  assert.match(result.content, /dismissed/);
}

// 4. CopilotKit's shape: the answer sent under the interrupted run's own runId continues that run.
{
  const { agent, interrupt, runId, events } = await interrupted("same run id");
  const { result } = await resumed(
    "same run id",
    agent,
    interrupt,
    { status: "resolved", payload: { approved: true } },
    { runId, from: events.length },
  );
  assert.equal(result.content, "remembered theme");
  assert.equal(agent.state.theme, "dark", "the approved call ran");
}

console.log("all interrupt scenarios passed");
