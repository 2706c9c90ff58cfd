// Forks of a thread with `@agent-tower/client`'s `ThreadList`, continued with the official
// `@ag-ui/client` 1.0 `HttpAgent` while the original is continued too; an edit and a regenerate;
// every branch read back from the server as a client opening it would.
//
//   node test/forks.mjs http://127.0.0.1:PORT
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { AgentTowerError, ThreadList } from "../dist/index.js";

const [base] = process.argv.slice(2);
assert.ok(base, "usage: node test/forks.mjs <base url>");
const list = new ThreadList({ baseUrl: base });
const said = (messages) => messages.map((m) => `${m.role}: ${m.content}`);

/** The thread as a client opening it holds it (`GET /threads/{threadId}/events`). */
const opened = async (threadId) => {
  const agent = new HttpAgent({
    url: `${base}/threads/${threadId}/events`,
    threadId,
    fetch: (url) => fetch(url, { headers: { Accept: "text/event-stream" } }),
  });
  await agent.runAgent();
  return agent.messages;
};

/** A run of `threadId` after `messages`, with `text` as the new message (none: another answer). */
const continued = async (threadId, messages, text) => {
  const agent = new HttpAgent({ url: `${base}/`, threadId, initialMessages: messages });
  if (text !== undefined) agent.addMessage({ id: randomUUID(), role: "user", content: text });
  await agent.runAgent();
  return agent.messages;
};

// The original: two turns.
const original = randomUUID();
let messages = await continued(original, [], "a trip, please");
messages = await continued(original, messages, "to the sea");
const before = said(messages);
assert.deepEqual(before, [
  "user: a trip, please",
  "assistant: You said: a trip, please",
  "user: to the sea",
  "assistant: You said: to the sea",
]);

// A fork after the first answer, and the original, continued at once.
const fork = await list.fork(original, { messageId: messages[1].id });
assert.deepEqual(fork.forkedFrom, { threadId: original, messageId: messages[1].id });
assert.equal(fork.title, "a trip, please");
const forkOpened = await opened(fork.threadId);
assert.deepEqual(said(forkOpened), before.slice(0, 2));
const [forkAfter, originalAfter] = await Promise.all([
  continued(fork.threadId, forkOpened, "to the mountains"),
  continued(original, messages, "and back"),
]);
assert.deepEqual(said(await opened(fork.threadId)), said(forkAfter));
assert.deepEqual(said(forkAfter).slice(2), ["user: to the mountains", "assistant: You said: to the mountains"]);
assert.deepEqual(said(await opened(original)), said(originalAfter));
assert.deepEqual(said(originalAfter).slice(0, 4), before);
console.log("ok fork and original continued at once");

// An edit of the second question: a fork before it, continued with the new question.
const edit = await list.fork(original, { beforeMessageId: messages[2].id, title: "By train" });
assert.equal(edit.title, "By train");
const edited = await continued(edit.threadId, await opened(edit.threadId), "by train");
assert.deepEqual(said(edited), [...before.slice(0, 2), "user: by train", "assistant: You said: by train"]);
// Another answer to it: a fork before the answer, run with no new message.
const again = await list.fork(original, { beforeMessageId: messages[3].id });
const regenerated = await continued(again.threadId, await opened(again.threadId));
assert.deepEqual(said(regenerated), before);
assert.notEqual(regenerated[3].id, messages[3].id);
assert.deepEqual(said(await opened(original)), said(originalAfter), "the original branch readable as it was");
console.log("ok edit and regenerate");

// The original lists its branches; a fork at a message it lacks is refused.
const thread = await (await fetch(`${base}/threads/${original}`)).json();
assert.deepEqual(
  thread.forks.map((f) => f.threadId),
  [again.threadId, edit.threadId, fork.threadId],
);
await assert.rejects(list.fork(original, { messageId: "nowhere" }), (error) => {
  assert.ok(error instanceof AgentTowerError);
  assert.equal(error.status, 422);
  assert.equal(error.code, "unknown_message");
  return true;
});
console.log("ok branches listed");
console.log("forks: passed");
