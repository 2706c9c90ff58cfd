// Times the official TypeScript AG-UI encoder (npm @ag-ui/encoder) on 10,000 TEXT_MESSAGE_CONTENT events.
import { EventEncoder } from "@ag-ui/encoder";
import { EventType } from "@ag-ui/core";

const N = 10_000;
const WORDS = ["lorem ", "ipsum ", "dolor "];
const events = Array.from({ length: N }, (_, i) => ({
  type: EventType.TEXT_MESSAGE_CONTENT,
  messageId: "01a2022b-d5ab-7221-9e11-c2a043f5f639",
  delta: WORDS[i % 3],
}));
const encoder = new EventEncoder();
let best = Infinity;
for (let round = 0; round < 7; round++) {
  const start = process.hrtime.bigint();
  for (const event of events) encoder.encode(event);
  best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
}
console.log(
  `node @ag-ui/encoder EventEncoder: ${(N / best / 1e6).toFixed(3)} M events/s (${((best / N) * 1e9).toFixed(0)} ns/event)`,
);
