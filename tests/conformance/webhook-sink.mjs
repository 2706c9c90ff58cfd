// A webhook receiver on the Standard Webhooks specification's own library (`standardwebhooks`):
// every delivery is checked with the secret; each is printed as a line of JSON
// `{"id", "verified", "error", "failed", "held", "body"}`. The first HOLD deliveries are never
// answered (their sender is killed meanwhile); the FAIL next ones are answered 500 (the sender
// must try them again); the others 204, each printed once answered.
//
//   SECRET=whsec_… HOLD=0 FAIL=0 node webhook-sink.mjs    (prints `listening PORT` first)
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const webhook = new Webhook(process.env.SECRET);
let holding = Number(process.env.HOLD ?? "0");
let failing = Number(process.env.FAIL ?? "0");

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    let verified = false;
    let error = null;
    try {
      webhook.verify(body, request.headers);
      verified = true;
    } catch (e) {
      error = String(e.message ?? e);
    }
    const id = request.headers["webhook-id"] ?? null;
    const held = holding > 0;
    const failed = !held && failing > 0;
    if (held) {
      holding -= 1;
    } else {
      if (failed) failing -= 1;
      response.writeHead(failed ? 500 : 204).end();
    }
    const line = { id, verified, error, failed, held, body: JSON.parse(body) };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
