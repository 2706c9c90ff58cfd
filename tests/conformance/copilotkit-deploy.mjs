// A deploy under the CopilotKit example, in Debian's Chromium: two `agent-tower serve` instances
// on one store behind a balancer (each request to the first instance that answers, as a load
// balancer in front of a rolling restart does), the example's runtime in front of the balancer.
// The first instance gets SIGTERM while the page streams an answer from it: the runtime stays up,
// the run goes on to its end on the second instance, and the next message is answered. On
// `@agent-tower/client` (`agent-tower`), the page shows the whole answer (the runtime re-joins
// the run where the second instance continues it); without it (`ag-ui`: the official `HttpAgent`
// and CopilotKit's own runner), the page keeps what it read before the hand-over.
//
//   node copilotkit-deploy.mjs agent-tower|ag-ui EXAMPLE_DIR http://FIRST http://SECOND FIRST_PID
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, request } from "node:http";
import { createInterface } from "node:readline";
import { browse, chat } from "./copilotkit-chat.mjs";
import { logged, text } from "./runs.mjs";

const [client, example, first, second, pid] = process.argv.slice(2);
assert.ok(
  ["agent-tower", "ag-ui"].includes(client) && example && first && second && pid,
  "usage: node copilotkit-deploy.mjs agent-tower|ag-ui <example dir> <first> <second> <first's pid>",
);
const ours = client === "agent-tower";

/** Sends `body` to the first of `backends` that answers (not refused, not 503). */
function forward(req, res, body, backends) {
  const [backend, ...rest] = backends;
  if (!backend) return void res.writeHead(502).end();
  const url = new URL(req.url, backend);
  const out = request(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (answer) => {
    if (answer.statusCode === 503 && rest.length) {
      answer.resume();
      return forward(req, res, body, rest);
    }
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  out.on("error", () => (res.headersSent ? res.destroy() : forward(req, res, body, rest)));
  // A client that leaves (the page's live thread list, say) leaves the backend too.
  res.on("close", () => out.destroy());
  out.end(body);
}
const balancer = createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => forward(req, res, Buffer.concat(chunks), [first, second]));
});
await new Promise((resolve) => balancer.listen(0, "127.0.0.1", resolve));
const agent = `http://127.0.0.1:${balancer.address().port}`;

const runtime = spawn("node", ["server.mjs"], {
  cwd: example,
  env: {
    ...process.env,
    AGENT_URL: `${agent}/`,
    AGENT_CLIENT: client,
    PORT: "0",
    COPILOTKIT_TELEMETRY_DISABLED: "true",
  },
  stdio: ["ignore", "pipe", "inherit"],
});
const lines = createInterface({ input: runtime.stdout });
const app = (await lines[Symbol.asyncIterator]().next()).value.match(/http:\/\/\S+/)[0];

const { browser, page, failed } = await browse();
const { say, ready } = chat(page);
try {
  await page.goto(`${app}/`);
  await ready();
  await say("hello before the deploy", "You said: hello before the deploy");
  await say("tell me slowly", /^lorem elit/);
  process.kill(Number(pid), "SIGTERM");

  const threadId = await page.textContent("#thread");
  const read = async () => (await fetch(`${second}/threads/${threadId}`)).json();
  const run = (await read()).runs.at(-1);
  const events = await logged(second, run.runId);
  assert.equal(events.at(-1).type, "RUN_FINISHED", "the run went on elsewhere to its end");
  assert.ok(events.some((e) => e.name === "agent_tower.takeover"), "continued by the second instance");
  // What the page ends with is the answer as the thread keeps it.
  const answer = (await read()).messages.filter((m) => m.role === "assistant").at(-1).content;
  assert.ok(answer.endsWith(text(events).slice(-60)), "the kept answer is the run's last words");
  // (Compared word by word: the page lays the Markdown out in its own lines.)
  const words = (text) => text.split(/\s+/).filter(Boolean).join(" ");
  const shownText = () => page.evaluate(() => document.body.innerText).then(words);
  if (ours) {
    await page.waitForFunction(
      (whole) => document.body.innerText.split(/\s+/).filter(Boolean).join(" ").includes(whole),
      words(answer),
      { timeout: 30_000 },
    );
    console.log(`ok the page showed the whole answer (${words(answer).split(" ").length} words) across the deploy`);
  } else {
    const after = (await shownText()).split("tell me slowly")[1].split(" ").filter(Boolean);
    const whole = words(answer).split(" ");
    let kept = 0;
    while (kept < after.length && after[kept] === whole[kept]) kept++;
    assert.ok(kept >= 2 && kept < whole.length, `the page kept the answer's first ${kept} words`);
    console.log(`ok the page kept the ${kept} words it read before the hand-over; the thread has all ${whole.length}`);
  }
  assert.equal(runtime.exitCode, null, "the runtime is up");

  await say("hello after the deploy", "You said: hello after the deploy");
  const kept = await read();
  assert.deepEqual(
    kept.messages.filter((m) => m.role === "user").map((m) => m.content),
    ["hello before the deploy", "tell me slowly", "hello after the deploy"],
  );
  if (ours) {
    const shown = await shownText();
    assert.equal(shown.split(words(answer)).length, 2, "the answer is shown once");
    assert.ok(shown.indexOf(words(answer)) < shown.indexOf("You said: hello after the deploy"));
  }
  console.log("ok the runtime stayed up and the next message was answered, in order");
  console.log("copilotkit-deploy: passed");
} catch (error) {
  await failed(`copilotkit-deploy-${client}`);
  throw error;
} finally {
  await browser.close();
  runtime.kill();
  balancer.close();
  balancer.closeAllConnections();
}
