// The official AG-UI client (@ag-ui/client 1.0 HttpAgent) keeps a sub-agent's transcript: what
// the researcher said and did while the lead's run streamed stays in the client's conversation
// when the run ends, a client restoring the thread from the other instance is shown it in the
// same place, and the next turn, which sends it back, keeps it there.
//
//   node agui-subagent-transcript.mjs http://A/ http://B/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const [first, second] = process.argv.slice(2);
assert.ok(first && second, "usage: node agui-subagent-transcript.mjs <url> <url>");

/** A message as a UI shows it: id, role, its sub-agent, its text and its calls. */
const view = (m) => [
  m.id,
  m.role,
  m.subagentRunId ?? null,
  m.content || "",
  (m.toolCalls ?? []).map((call) => call.function.name),
];

/** One run of `agent` at `url`; the client's conversation just before the run's last snapshot. */
async function run(agent, url) {
  agent.url = url;
  let streamed;
  await agent.runAgent(
    { runId: randomUUID() },
    { onMessagesSnapshotEvent: ({ messages }) => void (streamed = messages.map(view)) },
  );
  assert.ok(streamed, "the run ended with a snapshot");
  return streamed;
}

const threadId = randomUUID();
const task = 'add {"a": 2, "b": 3}';
const agent = new HttpAgent({
  url: first,
  threadId,
  initialMessages: [{ id: randomUUID(), role: "user", content: `researcher ${JSON.stringify({ task })}` }],
});

// 1. The researcher adds, then answers; the lead answers with what it said.
const streamed = await run(agent, first);
const researcher = agent.messages.filter((m) => m.subagentRunId);
assert.deepEqual(
  researcher.map((m) => [m.role, (m.toolCalls ?? []).map((c) => c.function.name)]),
  [["assistant", ["add"]], ["tool", []], ["assistant", []]],
  "the researcher's call, its result and its answer",
);
assert.equal(new Set(researcher.map((m) => m.subagentRunId)).size, 1, "one sub-agent run");
assert.equal(researcher[1].content, "5");
assert.deepEqual(agent.messages.map(view), streamed, "the run's end kept what streamed, in its order");
assert.deepEqual(
  agent.messages.map((m) => [m.role, Boolean(m.subagentRunId)]),
  [
    ["user", false],
    ["assistant", false],
    ["tool", false],
    ["assistant", true],
    ["tool", true],
    ["assistant", true],
    ["assistant", false],
  ],
  "the researcher's work after the lead's call and its result, before the lead's answer",
);
console.log(`ok the run's end kept the sub-agent's ${researcher.length} messages`);

// 2. Another client restores the thread from the other instance: the same conversation.
const restored = await (await fetch(new URL(`threads/${threadId}`, second))).json();
assert.deepEqual(restored.messages.map(view), agent.messages.map(view), "restored as it was shown");
console.log("ok restored with the sub-agent's messages in place");

// 3. The next turn, on the other instance, sends them back: the thread keeps them where they were.
const before = agent.messages.map(view);
agent.addMessage({ id: randomUUID(), role: "user", content: "thanks" });
await run(agent, second);
assert.deepEqual(agent.messages.map(view).slice(0, before.length), before, "the turns before, unchanged");
assert.deepEqual(
  agent.messages.slice(before.length).map((m) => [m.role, m.content]),
  [["user", "thanks"], ["assistant", "You said: thanks"]],
  "the lead answered the new turn alone",
);
const again = await (await fetch(new URL(`threads/${threadId}`, first))).json();
assert.deepEqual(again.messages.map(view), agent.messages.map(view), "the thread as the client holds it");
console.log("the sub-agent's transcript was kept in the thread");
