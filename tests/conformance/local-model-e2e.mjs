// One chat and one tool call through the official AG-UI client (@ag-ui/client HttpAgent) against
// `agent-tower serve --model openai:…` backed by a real local model (scripts/local-model-e2e.sh).
//
//   node local-model-e2e.mjs http://127.0.0.1:PORT/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { checkWire, tappedFetch } from "./sse.mjs";

const url = process.argv[2];
assert.ok(url, "usage: node local-model-e2e.mjs <url>");
const user = (content) => ({ id: randomUUID(), role: "user", content });

async function run(name, initialMessages) {
  const bodies = [];
  const agent = new HttpAgent({ url, threadId: randomUUID(), initialMessages, fetch: tappedFetch(bodies) });
  await agent.runAgent({ runId: randomUUID() });
  const events = checkWire(await bodies[0]);
  assert.equal(events.at(-1).type, "RUN_FINISHED", JSON.stringify(events.at(-1)));
  console.log(`ok ${name}: ${events.length} events; the model said: ${JSON.stringify(agent.messages.at(-1).content)}`);
  return { agent, events };
}

// 1. A chat: the model's words stream back.
{
  const { events } = await run("chat", [user("Say hello in one short sentence.")]);
  assert.ok(events.some((e) => e.type === "TEXT_MESSAGE_CONTENT"), "the answer streamed");
}

// 2. A tool call: one example call in the conversation, so that a small model calls `add`; the
//    server runs it and the model reads its result. A 135M model sampled at its default
//    temperature does not call a tool every time: up to five tries.
{
  let called;
  for (let attempt = 1; attempt <= 5 && !called; attempt++) {
    const { events } = await run(`tool call, try ${attempt}`, [
      { id: randomUUID(), role: "system", content: "You call tools." },
      user("What is 1 plus 1?"),
      { id: randomUUID(), role: "assistant", content: "", toolCalls: [
        { id: randomUUID(), type: "function", function: { name: "add", arguments: '{"a": 1, "b": 1}' } }] },
      user("What is 2 plus 3?"),
    ]);
    const call = events.find((e) => e.type === "TOOL_CALL_START");
    if (call) called = { call, events };
  }
  assert.ok(called, "the model called a tool");
  const { call, events } = called;
  const result = events.find((e) => e.type === "TOOL_CALL_RESULT" && e.toolCallId === call.toolCallId);
  assert.ok(result, "the server ran it");
  console.log(`ok the model called ${call.toolCallName}, which returned ${JSON.stringify(result.content)}`);
}
console.log("local model end to end passed");
