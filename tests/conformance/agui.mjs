// The official AG-UI client (@ag-ui/client 1.0 HttpAgent) against an agent-tower server.
//
//   node agui.mjs http://127.0.0.1:PORT/
//
// Each scenario runs through HttpAgent, whose own pipeline enforces and verifies the events. The
// raw response bytes are checked too, for what the client does not check: LF-only `data: <json>`
// framing, every event valid against the @ag-ui/core 1.0 zod schemas, no `null` anywhere, a
// terminal event at the end, and ids in MESSAGES_SNAPSHOT equal to the streamed ids.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const url = process.argv[2];
assert.ok(url, "usage: node agui.mjs <url>");

/** Streamed message ids all appear, unchanged, in the final MESSAGES_SNAPSHOT. */
function checkIds(events) {
  const snapshot = events.findLast((e) => e.type === "MESSAGES_SNAPSHOT");
  assert.ok(snapshot, "a MESSAGES_SNAPSHOT before the end");
  const ids = new Set(snapshot.messages.map((m) => m.id));
  for (const e of events) {
    if (e.type === "TEXT_MESSAGE_START" || e.type === "TOOL_CALL_RESULT") {
      assert.ok(ids.has(e.messageId), `${e.type} ${e.messageId} is in the snapshot`);
    }
    if (e.type === "TOOL_CALL_START") {
      const owner = snapshot.messages.find((m) => m.toolCalls?.some((c) => c.id === e.toolCallId));
      assert.ok(owner, `tool call ${e.toolCallId} is in the snapshot`);
      assert.equal(owner.id, e.parentMessageId, "the call belongs to its parent message");
    }
  }
}

async function scenario(name, initialMessages, params = {}, config = {}) {
  const bodies = [];
  const agent = new HttpAgent({
    url,
    threadId: randomUUID(),
    initialMessages,
    fetch: tappedFetch(bodies),
    ...config,
  });
  const seen = [];
  const result = await agent.runAgent({ runId: randomUUID(), ...params }, {
    onEvent: ({ event }) => {
      seen.push(event);
    },
  });
  const events = checkWire(await bodies[0]);
  assert.deepEqual(seen.map((e) => e.type), events.map((e) => e.type), "the client saw what was sent");
  console.log(`ok ${name}: ${events.length} events`);
  return { agent, events, result, bodies };
}

const user = (content) => ({ id: randomUUID(), role: "user", content });

/** Runs `work`, collecting what the client logs with console.warn (a patch it could not apply). */
async function collectingWarnings(work) {
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => warnings.push(args.join(" "));
  try {
    return { value: await work(), warnings };
  } finally {
    console.warn = warn;
  }
}

// 1. Plain chat.
{
  const { agent, events } = await scenario("plain chat", [user("hello there")]);
  checkIds(events);
  assert.equal(events[0].protocolVersion, "1.0");
  const answer = agent.messages.at(-1);
  assert.equal(answer.role, "assistant");
  assert.equal(answer.content, "You said: hello there");
}

// 2. A backend tool call with its result.
{
  const { agent, events } = await scenario("backend tool", [user('add {"a": 2, "b": 3}')]);
  checkIds(events);
  const result = events.find((e) => e.type === "TOOL_CALL_RESULT");
  assert.equal(result.content, "5");
  const toolMessage = agent.messages.find((m) => m.role === "tool");
  assert.equal(toolMessage.id, result.messageId);
  assert.match(agent.messages.at(-1).content, /returned 5/);
}

// 3. A frontend tool: the run ends with the call pending, the next run continues from its result.
{
  const tools = [
    {
      name: "change_background",
      description: "Changes the page's background colour.",
      parameters: { type: "object", properties: { color: { type: "string" } } },
    },
  ];
  const { agent, events } = await scenario(
    "frontend tool, first run",
    [user('change_background {"color": "blue"}')],
    { tools },
  );
  const finished = events.at(-1);
  const start = events.find((e) => e.type === "TOOL_CALL_START");
  assert.equal(start.toolCallName, "change_background");
  assert.deepEqual(finished.outcome, { type: "success", pendingToolCallIds: [start.toolCallId] });
  assert.ok(!events.some((e) => e.type === "TOOL_CALL_RESULT"), "the server does not run it");
  const call = agent.messages.find((m) => m.toolCalls?.length).toolCalls[0];
  assert.equal(JSON.parse(call.function.arguments).color, "blue");

  agent.addMessage({ id: randomUUID(), role: "tool", toolCallId: start.toolCallId, content: "background is blue" });
  const bodies = [];
  agent.fetch = tappedFetch(bodies);
  await agent.runAgent({ runId: randomUUID(), tools });
  const second = checkWire(await bodies[0]);
  assert.deepEqual(second.at(-1).outcome, { type: "success" });
  assert.match(agent.messages.at(-1).content, /change_background.*background is blue/);
  console.log(`ok frontend tool, second run: ${second.length} events`);
}

// 4. Shared state edited across two runs: the server's deltas apply in the client without a
//    warning, and the client ends with the state the server ends with.
{
  const all = { agui: { stateSnapshots: "all" } };
  const initial = { theme: "light", items: [1, 2] };
  const first = await collectingWarnings(() =>
    scenario(
      "shared state, first run",
      [user('remember {"key": "theme", "value": "dark"}')],
      { forwardedProps: all },
      { initialState: initial },
    ),
  );
  const { agent, events } = first.value;
  assert.deepEqual(events.find((e) => e.type === "STATE_SNAPSHOT").snapshot, initial);
  assert.ok(events.some((e) => e.type === "STATE_DELTA"), "the change went out as a delta");
  const serverFinal = events.findLast((e) => e.type === "STATE_SNAPSHOT").snapshot;
  assert.deepEqual(serverFinal, { theme: "dark", items: [1, 2] });
  assert.deepEqual(agent.state, serverFinal, "the client applied the delta");

  // The client sends its state back; the server continues from it.
  agent.addMessage(user('remember {"key": "items", "value": [3]}'));
  const bodies = [];
  agent.fetch = tappedFetch(bodies);
  const again = await collectingWarnings(() => agent.runAgent({ runId: randomUUID(), forwardedProps: all }));
  const second = checkWire(await bodies[0]);
  assert.deepEqual(second.find((e) => e.type === "STATE_SNAPSHOT").snapshot, serverFinal);
  const secondFinal = second.findLast((e) => e.type === "STATE_SNAPSHOT").snapshot;
  assert.deepEqual(secondFinal, { theme: "dark", items: [3] });
  assert.deepEqual(agent.state, secondFinal);
  assert.deepEqual([...first.warnings, ...again.warnings], [], "no warning from the client");
  console.log(`ok shared state, second run: ${second.length} events`);
}

// 5. Predictive state: PredictState before the call, the state set as soon as the arguments are
//    complete (before the tool runs), the client ending with the server's state.
{
  const {
    value: { agent, events },
    warnings,
  } = await collectingWarnings(() =>
    scenario(
      "predictive state",
      [user('write_document {"document": "Hello shared world"}')],
      { forwardedProps: { agui: { stateSnapshots: "all" } } },
    ),
  );
  const types = events.map((e) => e.type);
  const predict = events.find((e) => e.type === "CUSTOM" && e.name === "PredictState");
  assert.deepEqual(predict.value, [{ state_key: "document", tool: "write_document", tool_argument: "document" }]);
  assert.ok(types.indexOf("CUSTOM") < types.indexOf("TOOL_CALL_START"), "predicted before the call");
  assert.equal(types[types.indexOf("TOOL_CALL_END") + 1], "STATE_DELTA", "optimistic: right after the arguments");
  assert.ok(types.indexOf("STATE_DELTA") < types.indexOf("TOOL_CALL_RESULT"), "before the tool ran");
  const serverFinal = events.findLast((e) => e.type === "STATE_SNAPSHOT").snapshot;
  assert.deepEqual(serverFinal, { document: "Hello shared world" });
  assert.deepEqual(agent.state, serverFinal);
  assert.deepEqual(warnings, [], "no warning from the client");
}

// 6. Post-processing: citations in the answer are resolved after its text ended, and reach the
//    client as state deltas before the run ends.
{
  const {
    value: { agent, events },
    warnings,
  } = await collectingWarnings(() =>
    scenario("post-processing", [user("tower is modular [1] and composable [2]")], {
      forwardedProps: { agui: { stateSnapshots: "final" } },
      context: [{ description: "tower docs", value: "https://docs.rs/tower" }],
    }),
  );
  const types = events.map((e) => e.type);
  const answerId = events.findLast((e) => e.type === "TEXT_MESSAGE_START").messageId;
  assert.ok(types.lastIndexOf("STATE_DELTA") > types.lastIndexOf("TEXT_MESSAGE_END"), "after the text");
  const found = agent.state.citations.messages[answerId];
  assert.equal(found.status, "done");
  assert.deepEqual(found.citations["1"], { description: "tower docs", value: "https://docs.rs/tower" });
  assert.deepEqual(found.citations["2"], { unresolved: true });
  assert.deepEqual(agent.state, events.findLast((e) => e.type === "STATE_SNAPSHOT").snapshot);
  assert.deepEqual(warnings, [], "no warning from the client");
}

// 7. The client aborts mid-stream (a run of a million tokens).
{
  const bodies = [];
  const agent = new HttpAgent({ url, threadId: randomUUID(), initialMessages: [user("stream")], fetch: tappedFetch(bodies) });
  let contents = 0;
  const run = agent.runAgent(
    { runId: randomUUID(), forwardedProps: { scripted: { tokens: 1_000_000 } } },
    {
      onEvent: ({ event }) => {
        if (event.type === "TEXT_MESSAGE_CONTENT" && ++contents === 10) agent.abortRun();
      },
    },
  );
  await run.catch(() => {});
  const text = await bodies[0];
  if (text !== null) checkWire(text, { complete: false });
  assert.ok(contents >= 10, "the stream was flowing when aborted");
  console.log(`ok client abort after ${contents} tokens`);
}

console.log("all scenarios passed");
