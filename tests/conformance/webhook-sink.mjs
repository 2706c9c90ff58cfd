// A webhook receiver on the Standard Webhooks specification's own library (`standardwebhooks`):
// every delivery is checked with the secret; each is printed as a line of JSON
// `{"id", "verified", "error", "body"}` once answered. The first FAIL deliveries are answered
// 500 (the sender must try them again); the others 204.
//
//   SECRET=whsec_… FAIL=0 node webhook-sink.mjs    (prints `listening PORT` first)
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const webhook = new Webhook(process.env.SECRET);
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
    const failed = failing > 0;
    if (failed) failing -= 1;
    response.writeHead(failed ? 500 : 204).end();
    const line = { id: request.headers["webhook-id"] ?? null, verified, error, failed, body: JSON.parse(body) };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
