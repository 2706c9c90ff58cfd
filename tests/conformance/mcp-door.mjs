// The official MCP TypeScript clients against agent-tower's `/mcp`: v1 (`@modelcontextprotocol/sdk`,
// the 2025 generation, `initialize` and a session) and v2 (`@modelcontextprotocol/client` pinned to
// 2026-07-28, each request on its own). The agent is one tool; a call is a run of the caller's,
// followed to its end; an approval the run waits for is asked through elicitation.
//
//   node mcp-door.mjs http://127.0.0.1:PORT ALICE_TOKEN BOB_TOKEN
//
// Prints `ok <step>` per step and `mcp-door: passed` at the end.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client as V1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as V1Transport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from "@modelcontextprotocol/client";

const [base, alice, bob] = process.argv.slice(2);
assert.ok(base && alice && bob, "usage: node mcp-door.mjs <base> <alice-token> <bob-token>");
const endpoint = new URL("/mcp", base);
const ERROR = "agent-tower/error";
const auth = (token) => ({ requestInit: { headers: { Authorization: `Bearer ${token}` } } });

/** A v1 client of `token`; `answer` (if any) answers each elicitation, which is recorded in `asked`. */
async function v1(token, answer) {
  const client = new V1Client({ name: "mcp-door-v1", version: "1.0.0" }, { capabilities: answer ? { elicitation: {} } : {} });
  const asked = [];
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params);
      return answer(request.params);
    });
  }
  await client.connect(new V1Transport(endpoint, auth(token)));
  return { client, asked };
}

/** A v2 client of `token` on 2026-07-28; `answer` answers each elicitation (the SDK retries the call). */
async function v2(token, answer) {
  const client = new V2Client(
    { name: "mcp-door-v2", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  const asked = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    asked.push(request.params);
    return answer(request.params);
  });
  await client.connect(new V2Transport(endpoint, auth(token)));
  return { client, asked };
}

/** The thread as the AG-UI server shows it to `token`. */
async function thread(token, id) {
  const response = await fetch(new URL(`/threads/${id}`, base), { headers: { Authorization: `Bearer ${token}` } });
  return { status: response.status, body: response.status === 200 ? await response.json() : null };
}

const userTurns = (messages) => messages.filter((m) => m.role === "user").map((m) => m.content);

// 1. v1: the tool, a call with progress, and the next turn of the same conversation.
const { client: first } = await v1(alice);
const { tools } = await first.listTools();
assert.equal(tools.length, 1, "the agent is one tool");
const [tool] = tools;
assert.deepEqual(tool.inputSchema.required, ["prompt"]);
assert.ok(tool.description.length > 0, "the tool says what it does");
const progress = [];
const hello = await first.callTool({ name: tool.name, arguments: { prompt: "hello there" } }, undefined, {
  onprogress: (p) => progress.push(p),
});
assert.ok(!hello.isError, JSON.stringify(hello));
const answer = hello.content[0].text;
assert.ok(answer.length > 0, "the agent answered");
assert.equal(hello.structuredContent.answer, answer, "the structured answer is the text");
const { threadId, runId } = hello.structuredContent;
assert.ok(threadId && runId);
assert.ok(progress.some((p) => p.message === "answering"), `progress told: ${JSON.stringify(progress)}`);
assert.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), "progress only grows");
const again = await first.callTool({ name: tool.name, arguments: { prompt: "and once more", threadId } });
assert.ok(!again.isError, JSON.stringify(again));
assert.equal(again.structuredContent.threadId, threadId, "the same conversation");
assert.notEqual(again.structuredContent.runId, runId, "in a run of its own");
const kept = await thread(alice, threadId);
assert.equal(kept.status, 200);
assert.deepEqual(userTurns(kept.body.messages), ["hello there", "and once more"], "both turns, in order, in the log");
assert.equal(kept.body.messages.at(-1).content, again.content[0].text, "the answer is the thread's last message");
console.log(`ok v1 tool "${tool.name}" called twice on one thread, progress ${progress.map((p) => p.message).join(", ")}`);

// 2. Another principal: alice's thread does not exist for bob, over MCP or AG-UI.
const { client: bobs } = await v1(bob);
const foreign = await bobs.callTool({ name: tool.name, arguments: { prompt: "let me in", threadId } });
assert.equal(foreign.isError, true);
assert.equal(foreign._meta[ERROR].code, "unknown_thread", JSON.stringify(foreign));
assert.equal((await thread(bob, threadId)).status, 404);
assert.deepEqual(userTurns((await thread(alice, threadId)).body.messages), ["hello there", "and once more"], "bob changed nothing");
const unauthenticated = await fetch(endpoint, {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
});
assert.equal(unauthenticated.status, 401, "no token, no door");
console.log("ok another principal's thread is unknown; no token is refused");

// 3. Bad input: a JSON-RPC error naming the argument.
await assert.rejects(first.callTool({ name: tool.name, arguments: { promt: "typo" } }), /unknown argument `promt`/);
await assert.rejects(first.callTool({ name: "no_such_tool", arguments: { prompt: "x" } }), /no tool `no_such_tool`/);
console.log("ok a wrong argument and a wrong tool are refused by name");

// 4. v1 with elicitation: the approval is asked within the call; approved, the tool ran.
const remember = 'remember {"key": "theme", "value": "dark"}';
const { client: asking, asked } = await v1(alice, () => ({ action: "accept", content: { approved: true } }));
const approved = await asking.callTool({ name: tool.name, arguments: { prompt: remember } });
assert.ok(!approved.isError, JSON.stringify(approved));
assert.equal(asked.length, 1, "asked once");
assert.match(asked[0].message, /`remember`/, "the question names the tool");
assert.deepEqual(asked[0].requestedSchema.required, ["approved"]);
const remembered = (await thread(alice, approved.structuredContent.threadId)).body;
assert.equal(remembered.state?.theme, "dark", `the tool ran: ${JSON.stringify(remembered.state)}`);
assert.equal(remembered.pendingInterrupts.length, 0, "nothing left pending");
console.log("ok v1 approval asked within the call, approved, the tool ran");

// 5. Declined with feedback: the tool did not run, the agent read why.
const { client: refusing } = await v1(alice, () => ({ action: "accept", content: { approved: false, feedback: "not today" } }));
const declined = await refusing.callTool({ name: tool.name, arguments: { prompt: remember } });
assert.ok(!declined.isError, JSON.stringify(declined));
const refused = (await thread(alice, declined.structuredContent.threadId)).body;
assert.equal(refused.state?.theme, undefined, "the tool did not run");
const toolMessage = refused.messages.find((m) => m.role === "tool");
assert.match(toolMessage.content, /not today/, "the model read the feedback");
console.log("ok v1 approval declined with feedback: not run, the feedback in the thread");

// 6. A client that cannot elicit: the call says the run waits; an AG-UI client answers it.
const waiting = await first.callTool({ name: tool.name, arguments: { prompt: remember } });
assert.equal(waiting.isError, true);
assert.equal(waiting._meta[ERROR].code, "interrupted", JSON.stringify(waiting));
const [interrupt] = waiting._meta[ERROR].interrupts;
assert.equal(interrupt.metadata.toolName, "remember");
const { runId: waitingRun, threadId: waitingThread } = waiting._meta[ERROR];
assert.deepEqual((await thread(alice, waitingThread)).body.pendingInterrupts.map((i) => i.id), [interrupt.id], "it waits on the thread");
const resumed = await fetch(base, {
  method: "POST",
  headers: { Authorization: `Bearer ${alice}`, "Content-Type": "application/json", Accept: "text/event-stream" },
  body: JSON.stringify({
    threadId: waitingThread,
    runId: randomUUID(),
    messages: [],
    tools: [],
    context: [],
    state: null,
    forwardedProps: null,
    resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }],
  }),
});
const stream = await resumed.text();
assert.match(stream, /"type":"TOOL_CALL_RESULT"/, "the tool ran once answered over AG-UI");
assert.match(stream, /"type":"RUN_FINISHED"/);
console.log("ok a client without elicitation is told the run waits; answered over AG-UI, it went on");

// 7. v1 cancel: the call aborted mid-run cancels the run (read to its end from the log).
const abort = new AbortController();
const slowThread = randomUUID();
const slow = first.callTool({ name: tool.name, arguments: { prompt: "answer slowly please", threadId: slowThread } }, undefined, {
  signal: abort.signal,
  onprogress: (p) => {
    if (p.message === "answering") abort.abort("stop");
  },
});
await assert.rejects(slow);
const slowRun = (await thread(alice, slowThread)).body.runs.at(-1).runId;
const events = await fetch(new URL(`/runs/${slowRun}/events`, base), { headers: { Authorization: `Bearer ${alice}` } });
const frames = (await events.text()).split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
const end = frames.at(-1);
assert.equal(end.type, "RUN_FINISHED", JSON.stringify(end));
assert.equal(end.outcome?.type, "cancelled", JSON.stringify(end));
assert.ok(frames.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").length < 200, "cut before the slow answer's end");
console.log("ok v1 call aborted: its run ended cancelled");

// 8. v2 on 2026-07-28: the tool, a call with progress, an approval through input_required.
const { client: modern, asked: modernAsked } = await v2(alice, () => ({ action: "accept", content: { approved: true } }));
const modernTools = await modern.listTools();
assert.deepEqual(modernTools.tools.map((t) => t.name), [tool.name]);
const modernProgress = [];
const plain = await modern.callTool({ name: tool.name, arguments: { prompt: "hello from 2026" } }, { onprogress: (p) => modernProgress.push(p) });
assert.ok(!plain.isError, JSON.stringify(plain));
assert.ok(plain.content[0].text.length > 0);
assert.ok(modernProgress.some((p) => p.message === "answering"), JSON.stringify(modernProgress));
const modernApproved = await modern.callTool({ name: tool.name, arguments: { prompt: remember } });
assert.ok(!modernApproved.isError, JSON.stringify(modernApproved));
assert.equal(modernAsked.length, 1, "asked once, through input_required");
assert.match(modernAsked[0].message, /`remember`/);
const modernThread = (await thread(alice, modernApproved.structuredContent.threadId)).body;
assert.equal(modernThread.state?.theme, "dark", JSON.stringify(modernThread.state));
assert.equal(modernThread.runs.length, 1, "the answers continued the same run");
console.log("ok v2 (2026-07-28) call with progress, approval through input_required, one run");

// 9. v2: bob cannot continue alice's waiting run with its handle.
const { client: bobModern } = await v2(bob, () => ({ action: "accept", content: { approved: true } }));
const stolen = await bobModern.callTool({
  name: tool.name,
  arguments: { prompt: remember },
  requestState: waitingRun,
  inputResponses: { [interrupt.id]: { action: "accept", content: { approved: true } } },
}).catch((e) => ({ isError: true, thrown: String(e) }));
assert.equal(stolen.isError, true, JSON.stringify(stolen));
assert.equal(stolen._meta?.[ERROR]?.code, "unknown_run", JSON.stringify(stolen));
console.log("ok v2 another principal's run handle is refused");

await Promise.all([first, bobs, asking, refusing, modern, bobModern].map((c) => c.close()));
console.log("mcp-door: passed");
