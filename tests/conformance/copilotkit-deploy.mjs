// A deploy under the CopilotKit example, in Debian's Chromium: two `agent-tower serve` instances
// on one store behind a balancer (each request to the first instance that answers, as a load
// balancer in front of a rolling restart does), the example's runtime in front of the balancer.
// The first instance gets SIGTERM while the page streams an answer from it: the page shows the
// whole answer (the runtime re-joins the run where the second instance continues it), the
// runtime stays up, and the next message is answered.
//
//   node copilotkit-deploy.mjs EXAMPLE_DIR http://FIRST http://SECOND FIRST_PID
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createServer, request } from "node:http";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { chat } from "./copilotkit-chat.mjs";
import { logged, text } from "./runs.mjs";

const [example, first, second, pid] = process.argv.slice(2);
assert.ok(example && first && second && pid, "usage: node copilotkit-deploy.mjs <example dir> <first> <second> <first's pid>");
const artifacts = join(dirname(fileURLToPath(import.meta.url)), "../../target/browser-artifacts");

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
  env: { ...process.env, AGENT_URL: `${agent}/`, PORT: "0", COPILOTKIT_TELEMETRY_DISABLED: "true" },
  stdio: ["ignore", "pipe", "inherit"],
});
const lines = createInterface({ input: runtime.stdout });
const app = (await lines[Symbol.asyncIterator]().next()).value.match(/http:\/\/\S+/)[0];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const logs = [];
page.on("console", (message) => logs.push(`${message.type()}: ${message.text()}`));
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
  await page.waitForFunction(
    (whole) => document.body.innerText.split(/\s+/).filter(Boolean).join(" ").includes(whole),
    words(answer),
    { timeout: 30_000 },
  );
  assert.equal(runtime.exitCode, null, "the runtime is up");
  console.log(`ok the page showed the whole answer (${words(answer).split(" ").length} words) across the deploy`);

  await say("hello after the deploy", "You said: hello after the deploy");
  const kept = await read();
  assert.deepEqual(
    kept.messages.filter((m) => m.role === "user").map((m) => m.content),
    ["hello before the deploy", "tell me slowly", "hello after the deploy"],
  );
  const shown = await shownText();
  assert.equal(shown.split(words(answer)).length, 2, "the answer is shown once");
  assert.ok(shown.indexOf(words(answer)) < shown.indexOf("You said: hello after the deploy"));
  console.log("ok the runtime stayed up and the next message was answered, in order");
  console.log("copilotkit-deploy: passed");
} catch (error) {
  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, "copilotkit-deploy.png"), fullPage: true }).catch(() => {});
  console.error(`page console:\n${logs.join("\n")}`);
  console.error(`page text:\n${await page.evaluate(() => document.body.innerText).catch(() => "")}`);
  throw error;
} finally {
  await browser.close();
  runtime.kill();
  balancer.close();
}
