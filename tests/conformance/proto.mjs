// The same run over protobuf and over SSE, both parsed by the official client's own transport
// (@ag-ui/client runHttpRequest + transformHttpEventStream, which picks the protobuf parser from
// the response's content type), verified, and compared.
//
//   node proto.mjs http://127.0.0.1:PORT/
import assert from "node:assert/strict";
import { runHttpRequest, transformHttpEventStream, verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { AGUI_MEDIA_TYPE } from "@ag-ui/proto";
import { lastValueFrom, toArray } from "rxjs";

const url = process.argv[2];
const input = (runId) => ({
  threadId: `proto-${runId}`,
  runId,
  state: { mode: "proto", list: [1, 2.5, null, true] },
  messages: [{ id: "u1", role: "user", content: 'think, then add {"a": 20, "b": 22}' }],
});

async function run(accept, runId) {
  let contentType;
  const http$ = runHttpRequest(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept },
      body: JSON.stringify(input(runId)),
    });
    contentType = response.headers.get("content-type");
    return response;
  });
  const events = await lastValueFrom(transformHttpEventStream(http$).pipe(verifyEvents(), toArray()));
  for (const event of events) {
    const parsed = EventSchemas.safeParse(event);
    assert.ok(parsed.success, `${event.type} fails the schema: ${JSON.stringify(parsed.error?.issues)}`);
  }
  return { contentType, events };
}

const proto = await run(`${AGUI_MEDIA_TYPE}, text/event-stream;q=0.5`, "proto");
assert.equal(proto.contentType, AGUI_MEDIA_TYPE);
const sse = await run("text/event-stream", "sse");
assert.equal(sse.contentType, "text/event-stream");

// Ids differ between the two runs; everything else is the same.
const shape = (events) =>
  events.map((e) => ({
    type: e.type,
    delta: e.delta,
    content: e.content,
    snapshot: e.snapshot,
    toolCallName: e.toolCallName,
    outcome: e.outcome,
    usage: e.usage,
    roles: e.messages?.map((m) => m.role),
    texts: e.messages?.map((m) => (typeof m.content === "string" ? m.content.replace(/[0-9a-f-]{36}/g, "") : m.content)),
  }));
assert.deepEqual(shape(proto.events), shape(sse.events));
assert.ok(proto.events.some((e) => e.type === "REASONING_MESSAGE_CONTENT"));
assert.ok(proto.events.some((e) => e.type === "TOOL_CALL_RESULT" && e.content === "42"));
console.log(`ok protobuf: ${proto.events.length} events, same as SSE`);
