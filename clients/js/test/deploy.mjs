// A deploy under two streaming runs: the instance serving them (`first`, whose process id is
// given) gets SIGTERM with a drain shorter than the runs; another instance on the same store
// (`second`) continues them. `AgentTowerAgent` (its routes on `second`, as a load balancer
// would send its re-join there) reads its run to the end in one stream; a plain official
// `HttpAgent` sees its stream end cleanly, with the server's re-join notice, and no error.
//
//   node test/deploy.mjs http://FIRST http://SECOND FIRST_PID
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { logged } from "../../../tests/conformance/runs.mjs";
import { AgentTowerAgent } from "../dist/index.js";

const [first, second, pid] = process.argv.slice(2);
assert.ok(first && second && pid, "usage: node test/deploy.mjs <first> <second> <first's pid>");

const user = (content) => ({ id: randomUUID(), role: "user", content });
// Long enough to outlast the drain: 600 words, 5 ms apart.
const slow = { scripted: { tokens: 600, delay_ms: 5 } };

const ours = new AgentTowerAgent({ url: `${first}/`, baseUrl: `${second}/`, threadId: randomUUID(), initialMessages: [user("hello")] });
const plain = new HttpAgent({ url: `${first}/`, threadId: randomUUID(), initialMessages: [user("hello")] });

let started = 0;
let signalled;
const bothStreaming = new Promise((resolve) => (signalled = resolve));
const streaming = () => void (++started === 2 && signalled());
const seen = { ours: [], plain: [] };
const watch = (into) => ({
  onEvent: ({ event }) => void into.push(event.type === "CUSTOM" ? `CUSTOM ${event.name}` : event.type),
  onTextMessageStartEvent: streaming,
});
const runs = [
  ours.runAgent({ forwardedProps: slow }, watch(seen.ours)),
  plain.runAgent({ forwardedProps: slow }, watch(seen.plain)),
];
await bothStreaming;
process.kill(Number(pid), "SIGTERM");
const [ourRun, plainRun] = await Promise.allSettled(runs);

assert.equal(ourRun.status, "fulfilled", `AgentTowerAgent: ${ourRun.reason}`);
const kept = await (await fetch(`${second}/threads/${ours.threadId}`)).json();
const events = await logged(second, kept.runs.at(-1).runId);
assert.equal(events.at(-1).type, "RUN_FINISHED", "the run went on elsewhere to its end");
assert.ok(events.some((e) => e.name === "agent_tower.takeover"), "continued by the other instance");
// What the page shows is the conversation the server kept: the answer, whole, once.
const said = (messages) => messages.filter((m) => m.role !== "reasoning").map((m) => [m.role, m.content]);
assert.deepEqual(said(ours.messages), said(kept.messages), "the thread as the server kept it");
assert.equal(said(ours.messages).at(-1)[1].split(" ").filter(Boolean).length, 600, "every word");
assert.equal(seen.ours.at(-1), "RUN_FINISHED");
assert.ok(!seen.ours.includes("CUSTOM agent_tower.rejoin"), "the notice is the client's, not the app's");
console.log("ok AgentTowerAgent read its run to the end across the deploy");

assert.equal(plainRun.status, "fulfilled", `a plain HttpAgent fails: ${plainRun.reason}`);
assert.equal(seen.plain.at(-1), "CUSTOM agent_tower.rejoin", "a clean end, saying where to re-join");
assert.ok(!seen.plain.includes("RUN_ERROR"));
const plainRunId = (await (await fetch(`${second}/threads/${plain.threadId}`)).json()).runs.at(-1).runId;
const plainEvents = await logged(second, plainRunId);
assert.equal(plainEvents.at(-1).type, "RUN_FINISHED", "its run went on elsewhere to its end");
console.log("ok a plain HttpAgent's stream ended cleanly and its run went on");
console.log("deploy: passed");
