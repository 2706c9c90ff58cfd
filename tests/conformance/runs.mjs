// What a server logged, read back for the client scripts (node built-ins only: the client
// package's own test imports it too).
import assert from "node:assert/strict";

/** Every event `base` logged for `runId` (the whole run: it waits for the run's end). */
export async function logged(base, runId, headers = {}) {
  const response = await fetch(`${base}/runs/${runId}/events`, {
    headers: { Accept: "text/event-stream", ...headers },
  });
  assert.equal(response.status, 200, `the server has run ${runId}`);
  return (await response.text())
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => JSON.parse(line.slice(6)));
}

/** The text the events streamed. */
export const text = (events) =>
  events
    .filter((e) => e.type === "TEXT_MESSAGE_CONTENT")
    .map((e) => e.delta)
    .join("");
