// The official A2A JavaScript client (@a2a-js/sdk 1.3, A2A 1.0) against agent-tower's A2A door,
// on both bindings (JSON-RPC and HTTP+JSON): discovery, a message answered, a second task in the
// same context, a streamed task that waits for an approval answered over A2A, the same answered
// by an AG-UI client instead, a task followed with SubscribeToTask, one cancelled, and the
// caller's tasks listed in pages (another principal's never listed nor readable).
//
//   node a2a-door.mjs http://127.0.0.1:PORT ALICE_TOKEN BOB_TOKEN
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Role, TaskState } from "@a2a-js/sdk";
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
import { TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";

const [base, alice, bob] = process.argv.slice(2);
assert.ok(base && alice && bob, "usage: node a2a-door.mjs <base> <alice-token> <bob-token>");

/** `fetch` with `token` as the bearer. */
const bearer = (token) => (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

/** A client of `token` on `binding` (`jsonrpc` or `rest`), from the server's card. */
async function client(token, binding) {
  const fetchImpl = bearer(token);
  const transport = binding === "rest" ? new RestTransportFactory({ fetchImpl }) : new JsonRpcTransportFactory({ fetchImpl });
  return new ClientFactory({ transports: [transport] }).createFromUrl(base);
}

const part = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" });
const message = (text, ids = {}) => ({
  messageId: randomUUID(),
  contextId: ids.contextId ?? "",
  taskId: ids.taskId ?? "",
  role: Role.ROLE_USER,
  parts: [part(text)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const text = (parts) => parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const answerOf = (task) => text(task.artifacts.find((a) => a.artifactId === "answer").parts);
const remember = 'remember {"key": "theme", "value": "dark"}';

/** The thread (context) as the AG-UI server shows it to `token`. */
async function thread(token, id) {
  const response = await fetch(new URL(`/threads/${id}`, base), { headers: { Authorization: `Bearer ${token}` } });
  return response.status === 200 ? response.json() : null;
}

/** Every update of a stream, in order. */
async function collect(stream) {
  const updates = [];
  for await (const update of stream) updates.push(update.payload);
  return updates;
}

// 1. Discovery: the card, public, names both bindings and the bearer scheme.
const card = await (await fetch(new URL("/.well-known/agent-card.json", base))).json();
assert.deepEqual(card.supportedInterfaces.map((i) => i.protocolBinding).sort(), ["HTTP+JSON", "JSONRPC"]);
assert.equal(card.capabilities.streaming, true);
assert.equal(card.capabilities.pushNotifications, false);
assert.equal(card.securitySchemes.bearer.httpAuthSecurityScheme.scheme, "Bearer");
assert.equal(card.skills.length, 1);
const refused = await fetch(new URL("/a2a", base), {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }),
});
assert.equal(refused.status, 401, "the card is public, the door is not");
console.log(`ok card of "${card.name}": both bindings, streaming, bearer`);

for (const binding of ["jsonrpc", "rest"]) {
  const a2a = await client(alice, binding);

  // 2. A message answered; the next message of the context is another task on the same thread.
  const first = await a2a.sendMessage({ message: message("hello there") });
  assert.equal(first.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(first));
  assert.match(answerOf(first), /hello there/);
  const second = await a2a.sendMessage({ message: message("and again", { contextId: first.contextId }) });
  assert.equal(second.contextId, first.contextId, "the same context");
  assert.notEqual(second.id, first.id, "a task of its own");
  const kept = await thread(alice, first.contextId);
  assert.deepEqual(kept.messages.filter((m) => m.role === "user").map((m) => m.content), ["hello there", "and again"]);
  assert.equal(kept.messages.at(-1).content, answerOf(second), "the answer is the thread's last message");
  const read = await a2a.getTask({ id: first.id, historyLength: 10 });
  assert.equal(read.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(answerOf(read), answerOf(first), "read back: the task's own answer, not the context's last");
  console.log(`ok ${binding}: a message answered, a second task in its context`);

  // 3. Streamed: the task, the call named, the approval asked; answered `yes` over A2A.
  const updates = await collect(a2a.sendMessageStream({ message: message(remember) }));
  assert.equal(updates[0].$case, "task", "the task first");
  const task = updates[0].value;
  const states = updates.filter((u) => u.$case === "statusUpdate").map((u) => u.value.status);
  assert.ok(states.some((s) => s.state === TaskState.TASK_STATE_WORKING && /calling `remember`/.test(text(s.message.parts))));
  const asking = states.at(-1);
  assert.equal(asking.state, TaskState.TASK_STATE_INPUT_REQUIRED, JSON.stringify(states));
  assert.match(text(asking.message.parts), /`remember`/);
  const waiting = await a2a.getTask({ id: task.id });
  assert.equal(waiting.status.state, TaskState.TASK_STATE_INPUT_REQUIRED, "GetTask says so too");
  const approved = await a2a.sendMessage({ message: message("yes", { taskId: task.id, contextId: task.contextId }) });
  assert.equal(approved.id, task.id, "the same task went on");
  assert.equal(approved.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(approved.status));
  assert.equal((await thread(alice, task.contextId)).state.theme, "dark", "the approved call ran");
  await assert.rejects(
    a2a.sendMessage({ message: message("more", { taskId: task.id }) }),
    (error) => error instanceof UnsupportedOperationError || /ended/.test(String(error)),
    "an ended task takes no message",
  );
  console.log(`ok ${binding}: a streamed task asked for approval, answered yes over A2A, the call ran`);

  // 4. The same approval answered by an AG-UI client instead (resuming the run under its id).
  const other = (await collect(a2a.sendMessageStream({ message: message(remember) })))[0].value;
  const pending = (await thread(alice, other.contextId)).pendingInterrupts;
  const resumed = await fetch(base, {
    method: "POST",
    headers: { Authorization: `Bearer ${alice}`, "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({
      threadId: other.contextId,
      runId: other.id,
      messages: [],
      tools: [],
      context: [],
      state: null,
      forwardedProps: null,
      resume: [{ interruptId: pending[0].id, status: "resolved", payload: { approved: true } }],
    }),
  });
  assert.match(await resumed.text(), /"type":"RUN_FINISHED"/);
  const done = await a2a.getTask({ id: other.id });
  assert.equal(done.status.state, TaskState.TASK_STATE_COMPLETED, "the task went on through the web door");
  console.log(`ok ${binding}: an approval answered over AG-UI completes the A2A task`);

  // 5. Followed with SubscribeToTask: the task as it is, then its updates to its end.
  const slow = await a2a.sendMessage({ message: message("answer slowly please"), configuration: { returnImmediately: true, acceptedOutputModes: [], historyLength: 0, taskPushNotificationConfig: undefined } });
  assert.equal(slow.status.state, TaskState.TASK_STATE_WORKING, "returned at once, working");
  const followed = await collect(a2a.resubscribeTask({ id: slow.id }));
  assert.equal(followed[0].$case, "task");
  assert.equal(followed[0].value.id, slow.id);
  assert.equal(followed.at(-1).value.status.state, TaskState.TASK_STATE_COMPLETED);
  const streamed = followed.filter((u) => u.$case === "artifactUpdate").map((u) => text(u.value.artifact.parts)).join("");
  const finished = await a2a.getTask({ id: slow.id });
  assert.ok(answerOf(finished).endsWith(streamed.slice(-50)), "the streamed answer is the task's");
  await assert.rejects(a2a.resubscribeTask({ id: slow.id }).next(), /ended|UnsupportedOperation/i, "an ended task has nothing to follow");
  console.log(`ok ${binding}: SubscribeToTask followed a task to its end`);

  // 6. Cancelled.
  const doomed = await a2a.sendMessage({ message: message("answer slowly please"), configuration: { returnImmediately: true, acceptedOutputModes: [], historyLength: 0, taskPushNotificationConfig: undefined } });
  const cancelled = await a2a.cancelTask({ id: doomed.id });
  assert.equal(cancelled.status.state, TaskState.TASK_STATE_CANCELED, JSON.stringify(cancelled.status));
  console.log(`ok ${binding}: a working task cancelled`);

  // 7. Listed: alice's tasks, the most recently changed first, in pages; none of bob's.
  const listed = [];
  let pageToken = "";
  let pages = 0;
  do {
    const page = await a2a.listTasks({ pageSize: 3, pageToken, contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, historyLength: 0, statusTimestampAfter: undefined, includeArtifacts: false, tenant: "" });
    pages += 1;
    listed.push(...page.tasks);
    pageToken = page.nextPageToken;
    assert.ok(page.totalSize >= listed.length);
  } while (pageToken !== "");
  assert.ok(pages >= 2, "in pages");
  const ids = listed.map((t) => t.id);
  for (const id of [first.id, second.id, task.id, other.id, slow.id, doomed.id]) assert.ok(ids.includes(id), `${id} listed`);
  const times = listed.map((t) => Date.parse(t.status.timestamp));
  assert.ok(times.every((t, i) => i === 0 || t <= times[i - 1]), "the most recently changed first");
  assert.equal(new Set(ids).size, ids.length, "each once");

  const bobs = await client(bob, binding);
  const bobList = await bobs.listTasks({ pageSize: 100, pageToken: "", contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, historyLength: 0, statusTimestampAfter: undefined, includeArtifacts: false, tenant: "" });
  assert.ok(bobList.tasks.every((t) => !ids.includes(t.id)), "bob lists none of alice's tasks");
  await assert.rejects(bobs.getTask({ id: first.id }), (e) => e instanceof TaskNotFoundError || /not found/i.test(String(e)));
  await assert.rejects(bobs.cancelTask({ id: slow.id }), (e) => e instanceof TaskNotFoundError || /not found/i.test(String(e)));
  console.log(`ok ${binding}: ${listed.length} tasks listed in ${pages} pages; bob sees none of them`);
}
console.log("a2a-door: passed");
