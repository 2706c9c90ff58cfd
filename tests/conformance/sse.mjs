// Checks of agent-tower's SSE bodies that the official client does not make itself, shared by
// the client scripts.
import assert from "node:assert/strict";
import { EventSchemas } from "@ag-ui/core/schemas";

function noNulls(value, path) {
  assert.notEqual(value, null, `explicit null at ${path}`);
  if (typeof value === "object") {
    for (const [k, v] of Object.entries(value)) noNulls(v, `${path}.${k}`);
  }
}

/** A fetch that keeps a copy of every response body. */
export function tappedFetch(bodies) {
  return async (input, init) => {
    const response = await fetch(input, init);
    const [mine, theirs] = response.body.tee();
    bodies.push(new Response(mine).text().catch(() => null));
    return new Response(theirs, { status: response.status, headers: response.headers });
  };
}

/**
 * Checks one SSE body and returns its events: LF-only framing, one `data: <json>` line per frame
 * after an `id: <runId>:<seq>` line numbering the run's events one by one (from `from + 1`, and
 * under `runId`, when given), every event valid against the @ag-ui/core 1.0 zod schemas, no
 * `null` anywhere, and (for a complete body) exactly one terminal event, at the end.
 */
export function checkWire(text, { complete = true, runId, from } = {}) {
  assert.ok(!text.includes("\r"), "LF line endings only");
  const frames = text.split("\n\n");
  const last = frames.pop();
  if (complete) assert.equal(last, "", "the body ends with a complete frame");
  const events = [];
  let next = from === undefined ? undefined : from + 1;
  for (let frame of frames) {
    if (frame.startsWith(":")) continue; // keep-alive comment
    const match = /^id: (.*):(\d+)\n/.exec(frame);
    assert.ok(match, `the frame starts with an id line: ${frame}`);
    const [line, run, seq] = match;
    runId ??= run;
    next ??= Number(seq);
    assert.equal(`${run}:${seq}`, `${runId}:${next}`, "ids name the run and number its events");
    next += 1;
    frame = frame.slice(line.length);
    assert.ok(frame.startsWith("data: ") && !frame.includes("\n"), `one data line per frame: ${frame}`);
    const event = JSON.parse(frame.slice("data: ".length));
    noNulls(event, event.type);
    const parsed = EventSchemas.safeParse(event);
    assert.ok(parsed.success, `${event.type} fails the schema: ${JSON.stringify(parsed.error?.issues)}`);
    events.push(event);
  }
  if (complete) {
    assert.ok(["RUN_FINISHED", "RUN_ERROR"].includes(events.at(-1)?.type), "a terminal event ends the stream");
    const terminals = events.filter((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
    assert.equal(terminals.length, 1, "exactly one terminal event");
  }
  return events;
}
