// `@agent-tower/client` against a running `agent-tower serve` (the scripted model and the demo
// tools, whose `remember` is asked about), through the official `@ag-ui/client` 1.0 pipeline.
//
//   node test/connect.mjs http://127.0.0.1:PORT
//
// Each check compares what a fresh agent restores with what the server logged, so the client
// cannot pass by showing something the server never sent.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";
import { logged as loggedBy, text } from "../../../tests/conformance/runs.mjs";
import { AgentTowerAgent, AgentTowerRunner } from "../dist/index.js";

const [base] = process.argv.slice(2);
assert.ok(base, "usage: node test/connect.mjs <base url>");
const url = `${base}/`;

const user = (content) => ({ id: randomUUID(), role: "user", content });
const agentOn = (threadId, messages = []) =>
  new AgentTowerAgent({ url, threadId, initialMessages: messages });

/** Every event the server logged for `runId` (waits for the run's end). */
const logged = (runId) => loggedBy(base, runId);
const thread = async (id) => (await fetch(`${base}/threads/${id}`)).json();
const visible = (messages) => messages.map(({ id, role, content }) => ({ id, role, content }));

// Capabilities, as the official schema reads them.
{
  const capabilities = AgentCapabilitiesSchema.parse(await agentOn(randomUUID()).getCapabilities());
  assert.equal(capabilities.transport.resumable, true);
  assert.ok(capabilities.tools.items.some((tool) => tool.name === "remember"), "the server's tools");
  assert.equal(capabilities.humanInTheLoop.interrupts, true, "its rules ask about calls");
  assert.equal(capabilities.humanInTheLoop.approveWithEdits, true);
  console.log("ok capabilities");
}

// A thread nobody has: nothing to restore, and no error.
{
  const agent = agentOn(randomUUID());
  await agent.connectAgent();
  assert.deepEqual(agent.messages, []);
  console.log("ok unknown thread");
}

// A finished thread: a new agent on it gets its conversation and state.
{
  const threadId = randomUUID();
  const first = agentOn(threadId, [user('remember {"key": "theme", "value": "dark"}')]);
  first.state = {};
  // The demo asks before `remember`: approve it, then the thread ends with the tool's answer.
  await first.runAgent();
  const [interrupt] = first.pendingInterrupts;
  assert.ok(interrupt, "the server asked before remember");
  await first.runAgent({ resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }] });
  assert.equal(first.state.theme, "dark");
  const restored = agentOn(threadId);
  await restored.connectAgent();
  assert.deepEqual(visible(restored.messages), visible(first.messages), "the same conversation");
  assert.deepEqual(restored.state, first.state, "the same state");
  assert.deepEqual(restored.pendingInterrupts, []);
  console.log(`ok finished thread restored (${restored.messages.length} messages)`);
}

// A thread waiting for an approval: the interrupt comes back, and the restored agent answers it.
{
  const threadId = randomUUID();
  const first = agentOn(threadId, [user('remember {"key": "font", "value": "serif"}')]);
  await first.runAgent();
  const [asked] = first.pendingInterrupts;
  assert.ok(asked);
  const restored = agentOn(threadId);
  await restored.connectAgent();
  assert.deepEqual(
    restored.pendingInterrupts.map((i) => [i.id, i.toolCallId]),
    [[asked.id, asked.toolCallId]],
    "the same interrupt waits",
  );
  await restored.runAgent({ resume: [{ interruptId: asked.id, status: "resolved", payload: { approved: true } }] });
  assert.equal(restored.state.font, "serif", "answered from the restored agent");
  assert.equal((await thread(threadId)).pendingInterrupts.length, 0);
  console.log("ok pending interrupt restored and answered");
}

// A run in flight on a thread with history: a second agent (a reloaded page) shows the
// conversation in its order, the question the run answers after the turns before it, and follows
// the run to the end while the first still reads it.
{
  const threadId = randomUUID();
  const first = agentOn(threadId, [user("hello one")]);
  await first.runAgent();
  const question = user("tell me slowly");
  first.addMessage(question);
  let tokens = 0;
  let joined;
  const seen = new Promise((resolve) => (joined = resolve));
  const running = first.runAgent(
    {},
    { onTextMessageContentEvent: () => void (++tokens === 5 && joined(tokens)) },
  );
  const after = await seen;
  const second = agentOn(threadId);
  await second.connectAgent();
  await running;
  const runId = (await thread(threadId)).runs.at(-1).runId;
  const events = await logged(runId);
  assert.equal(events.at(-1).type, "RUN_FINISHED");
  const said = (agent) => agent.messages.filter((m) => m.role !== "reasoning");
  assert.deepEqual(
    said(second).map((m) => [m.role, m.content]),
    [
      ["user", "hello one"],
      ["assistant", "You said: hello one"],
      ["user", "tell me slowly"],
      ["assistant", text(events)],
    ],
    "the conversation in order, every token once",
  );
  assert.deepEqual(visible(said(second)), visible(said(first)), "as the first reader has it");
  // The next turn, from the reloaded page, is stored in that order.
  second.addMessage(user("and then?"));
  await second.runAgent();
  assert.deepEqual(
    (await thread(threadId)).messages.map((m) => [m.role, m.content]).filter(([role]) => role !== "reasoning"),
    said(second).map((m) => [m.role, m.content]),
    "the thread as the page shows it",
  );
  console.log(`ok run in flight re-joined in order after ${after} of ${tokens} tokens`);
}

// Stop: the run is cancelled on the server, not only left.
{
  const threadId = randomUUID();
  const agent = agentOn(threadId, [user("tell me slowly")]);
  let tokens = 0;
  await agent
    .runAgent({}, { onTextMessageContentEvent: () => void (++tokens === 5 && agent.abortRun()) })
    .catch(() => {});
  const run = (await thread(threadId)).runs.at(-1);
  const events = await logged(run.runId);
  assert.deepEqual(events.at(-1).outcome, { type: "cancelled" }, "the server cancelled it");
  assert.ok(text(events).split(" ").length < 150, "early");
  console.log("ok abortRun cancels on the server");
}

// The CopilotKit runner: connect restores from the server, stop cancels there.
{
  const threadId = randomUUID();
  const runner = new AgentTowerRunner({ url });
  const agent = agentOn(threadId, [user("tell me slowly")]);
  const input = { threadId, runId: randomUUID(), messages: agent.messages, tools: [], context: [], state: {}, forwardedProps: {} };
  const types = [];
  let stopped;
  const ended = new Promise((resolve, reject) =>
    runner.run({ threadId, agent, input }).subscribe({
      next: (event) => {
        types.push(event.type);
        if (types.filter((t) => t === "TEXT_MESSAGE_CONTENT").length === 3 && !stopped) {
          stopped = runner.stop({ threadId });
        }
      },
      complete: resolve,
      error: resolve,
    }),
  );
  assert.equal(await runner.isRunning({ threadId }), true);
  await ended;
  assert.equal(await stopped, true);
  const events = await logged(input.runId);
  // The input declares no protocol version, as CopilotKit's 0.0.x agents send it: the end is
  // the `RUN_ERROR` their schema knows.
  assert.deepEqual([events.at(-1).type, events.at(-1).code], ["RUN_ERROR", "cancelled"]);
  const restored = [];
  await new Promise((resolve, reject) =>
    runner.connect({ threadId }).subscribe({ next: (e) => restored.push(e), complete: resolve, error: reject }),
  );
  assert.deepEqual(
    restored.map((e) => e.type),
    ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"],
    "the ended thread, as one connect",
  );
  assert.equal(await new AgentTowerRunner({ url }).isRunning({ threadId }), false);
  console.log("ok runner runs, stops and connects through the server");
}

console.log("connect: passed");
