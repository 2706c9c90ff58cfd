// Reads {"events": [...], "frames": "<hex>"} on stdin: the JSON events and the same events as
// agent-tower framed them in protobuf. Decodes every frame with the official @ag-ui/proto and
// compares it with the JSON event.
import assert from "node:assert/strict";
import { decode } from "@ag-ui/proto";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { events, frames } = JSON.parse(input);
const bytes = Buffer.from(frames, "hex");
let offset = 0;
const failures = [];
for (const [i, expected] of events.entries()) {
  const length = bytes.readUInt32BE(offset);
  const decoded = decode(new Uint8Array(bytes.subarray(offset + 4, offset + 4 + length)));
  offset += 4 + length;
  try {
    assert.deepEqual(decoded, expected);
  } catch {
    failures.push(`event ${i} (${expected.type}):\n  ours:    ${JSON.stringify(expected)}\n  decoded: ${JSON.stringify(decoded)}`);
  }
}
assert.equal(offset, bytes.length, "no bytes left over");
assert.equal(failures.length, 0, `differs after the official decode:\n${failures.join("\n")}`);
console.log(`ok ${events.length} events decode to their JSON`);
