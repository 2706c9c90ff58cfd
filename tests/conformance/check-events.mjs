// Reads a JSON array of AG-UI events on stdin and checks them the way @ag-ui/client does:
// each against the @ag-ui/core 1.0 zod schemas, the sequence with the client's verifyEvents.
import assert from "node:assert/strict";
import { verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom, toArray } from "rxjs";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const events = JSON.parse(input);
for (const event of events) {
  const parsed = EventSchemas.safeParse(event);
  assert.ok(parsed.success, `${event.type} fails the schema: ${JSON.stringify(parsed.error?.issues)}`);
}
const verified = await lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
assert.equal(verified.length, events.length);
console.log(`ok ${events.length} events`);
