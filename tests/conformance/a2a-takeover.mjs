// A task survives its instance: the official A2A client (@a2a-js/sdk) starts a task on the first
// of two instances on one store; mid-answer the first is killed (SIGKILL); the client subscribes
// to the task through the second, which continues the run once the first's lease ran out, and
// reads it to its end: the same task, its whole answer.
//
//   node a2a-takeover.mjs FIRST_BASE SECOND_BASE FIRST_PID
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Role, TaskState } from "@a2a-js/sdk";
import { ClientFactory, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const [first, second, pid] = process.argv.slice(2);
assert.ok(first && second && pid, "usage: node a2a-takeover.mjs <first> <second> <first-pid>");

const client = (base) => new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(base);
const message = (text) => ({
  messageId: randomUUID(),
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const text = (parts) => parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

const before = await client(first);
const updates = before.sendMessageStream({ message: message("answer slowly please") });
const { value: opening } = await updates.next();
assert.equal(opening.payload.$case, "task");
const task = opening.payload.value;
// Once the answer streams, the instance dies.
for await (const update of updates) {
  if (update.payload.$case === "artifactUpdate" && text(update.payload.value.artifact.parts).length > 0) break;
}
process.kill(Number(pid), "SIGKILL");

const after = await client(second);
const followed = [];
for await (const update of after.resubscribeTask({ id: task.id })) followed.push(update.payload);
assert.equal(followed[0].$case, "task");
assert.equal(followed[0].value.id, task.id, "the same task");
const end = followed.at(-1);
assert.equal(end.$case, "statusUpdate");
assert.equal(end.value.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(end.value.status));
const done = await after.getTask({ id: task.id, historyLength: 0 });
const answer = text(done.artifacts.find((a) => a.artifactId === "answer").parts);
assert.ok(answer.split(" ").length >= 100, `the whole slow answer: ${answer.length} chars`);
console.log(`ok the task continued on the second instance to its end: ${answer.length} chars`);
console.log("a2a-takeover: passed");
