// `@agent-tower/client`'s `ThreadList` against a running `agent-tower serve`: threads made with
// the official `@ag-ui/client` 1.0 pipeline are listed, followed live, named, archived, found
// and deleted.
//
//   node test/threads.mjs http://127.0.0.1:PORT
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { AgentTowerAgent, AgentTowerError, ThreadList } from "../dist/index.js";

const [base] = process.argv.slice(2);
assert.ok(base, "usage: node test/threads.mjs <base url>");

const list = new ThreadList({ baseUrl: base });
const changes = [];
let told = () => {};
const stop = await list.follow((change) => {
  changes.push(change);
  told();
});
/** The next change the follower is told (failing after 10 s). */
const next = () =>
  changes.length > 0
    ? Promise.resolve(changes.shift())
    : new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no change within 10 s")), 10_000);
        told = () => {
          clearTimeout(timer);
          told = () => {};
          resolve(changes.shift());
        };
      });

const talk = async (text) => {
  const threadId = randomUUID();
  const agent = new AgentTowerAgent({
    url: `${base}/`,
    threadId,
    initialMessages: [{ id: randomUUID(), role: "user", content: text }],
  });
  await agent.runAgent();
  return threadId;
};

/**
 * The first change the follower is told that `test` accepts: a thread is told of as its first run
 * starts and again as it ends, and a change may be told twice; a client updates by id.
 */
const until = async (test) => {
  for (;;) {
    const change = await next();
    if (test(change)) return change;
  }
};
const updated = (threadId) => (change) =>
  change.type === "THREAD_UPDATED" && change.thread.threadId === threadId;

// A thread talked in is listed and followed, titled by its first prompt's first line.
const trip = await talk("plan the trip\nto the sea");
let change = await until(updated(trip));
assert.equal(change.thread.title, "plan the trip");
const milk = await talk("buy milk");
await until(updated(milk));
let page = await list.list();
assert.deepEqual(
  page.threads.map((t) => [t.threadId, t.title]),
  [
    [milk, "buy milk"],
    [trip, "plan the trip"],
  ],
  "newest first",
);
console.log("ok listed and followed");

// Pages: one at a time, to the last.
const first = await list.list({ limit: 1 });
assert.equal(first.threads[0].threadId, milk);
const second = await list.list({ limit: 1, after: first.next });
assert.equal(second.threads[0].threadId, trip);
assert.equal(second.next, null);
console.log("ok pages");

// Named, found by its name; archived, in the archive only.
const named = await list.rename(trip, "Trip");
assert.equal(named.title, "Trip");
// (Waiting for a change that never comes fails after 10 s.)
await until((c) => updated(trip)(c) && c.thread.title === "Trip");
assert.deepEqual((await list.list({ search: "TRI" })).threads.map((t) => t.threadId), [trip]);
await list.archive(milk);
await until((c) => updated(milk)(c) && c.thread.archived);
assert.deepEqual((await list.list()).threads.map((t) => t.threadId), [trip]);
assert.deepEqual((await list.list({ archived: true })).threads.map((t) => t.threadId), [milk]);
assert.equal((await list.list({ archived: "all" })).threads.length, 2);
console.log("ok named, archived");

// Deleted: the follower is told, the list no longer has it, and asking again is an error.
await list.delete(milk);
change = await until((c) => c.type === "THREAD_DELETED");
assert.deepEqual(change, { type: "THREAD_DELETED", threadId: milk });
assert.equal((await list.list({ archived: "all" })).threads.length, 1);
await assert.rejects(list.delete(milk), (error) => {
  assert.ok(error instanceof AgentTowerError);
  assert.equal(error.status, 404);
  assert.equal(error.code, "unknown_thread");
  return true;
});
await assert.rejects(list.rename(trip, ""), (error) => error.code === "invalid_title");
console.log("ok deleted");

stop();
console.log("threads: passed");
