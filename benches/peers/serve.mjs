// The peer of `agent-tower serve` in benches/load.rs: an AG-UI server on the official TypeScript
// SDK (npm @ag-ui/encoder and @ag-ui/core) and Node's own HTTP server, answering a run as the
// scripted model does (`forwardedProps.scripted.tokens` filler words, `delay_ms` between them),
// with no run log. Prints `addr=127.0.0.1:PORT` once it listens.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { EventEncoder } from "@ag-ui/encoder";
import { EventType } from "@ag-ui/core";

const WORDS = ["lorem ", "ipsum ", "dolor "];
const MAX_BODY = 1 << 20;

function run(request, response, input) {
  const encoder = new EventEncoder({ accept: request.headers.accept });
  const scripted = input.forwardedProps?.scripted ?? {};
  const tokens = scripted.tokens ?? 100;
  const delay = scripted.delay_ms ?? 0;
  const { threadId, runId } = input;
  const messageId = randomUUID();
  const send = (event) => response.write(encoder.encode(event));
  response.writeHead(200, { "content-type": encoder.getContentType() });
  send({ type: EventType.RUN_STARTED, threadId, runId });
  send({ type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant" });
  let sent = 0;
  const next = () => {
    while (sent < tokens) {
      send({ type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: WORDS[sent % 3] });
      sent += 1;
      if (delay > 0) {
        const timer = setTimeout(next, delay);
        response.on("close", () => clearTimeout(timer));
        return;
      }
    }
    send({ type: EventType.TEXT_MESSAGE_END, messageId });
    send({ type: EventType.RUN_FINISHED, threadId, runId });
    response.end();
  };
  next();
}

const server = http.createServer((request, response) => {
  const chunks = [];
  let size = 0;
  request.on("data", (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY) {
      response.writeHead(413).end();
      request.destroy();
    } else {
      chunks.push(chunk);
    }
  });
  request.on("end", () => {
    let input;
    try {
      input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      response.writeHead(400).end();
      return;
    }
    run(request, response, input);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  console.error(`addr=127.0.0.1:${server.address().port}`);
});
