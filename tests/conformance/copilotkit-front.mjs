// CopilotKit's runtime as a trusted front of `agent-tower serve --front-token-env`: the example
// in examples/copilotkit with AGENT_FRONT_TOKEN, two users in Debian's Chromium.
//
//   node copilotkit-front.mjs http://127.0.0.1:PAGE_PORT http://127.0.0.1:AGENT_PORT FRONT_TOKEN
//
// Each user signs in to the runtime and chats; the thread each made belongs to them on the
// server: the front acting for its owner reads it, acting for the other user it does not exist.
// The second user's browser sends `X-Agent-Tower-User` naming the first: it changes nothing.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { chat } from "./copilotkit-chat.mjs";

const [app, agent, front] = process.argv.slice(2);
assert.ok(app && agent && front, "usage: node copilotkit-front.mjs <page url> <agent url> <front token>");
const artifacts = join(dirname(fileURLToPath(import.meta.url)), "../../target/browser-artifacts");

/** The status of `GET /threads/{thread}` from the front, acting for `user`, and the thread's messages. */
async function threadAs(user, thread) {
  const response = await fetch(`${agent}/threads/${thread}`, {
    headers: { Authorization: `Bearer ${front}`, "X-Agent-Tower-User": user },
  });
  const body = await response.json();
  return { status: response.status, said: (body.messages ?? []).map((m) => m.content) };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const pages = [];

/** `user` signs in (their browser also sending `headers`) and says `text`; their thread's id. */
async function chatAs(user, text, headers = {}) {
  const context = await browser.newContext({ extraHTTPHeaders: headers });
  const page = await context.newPage();
  const logs = [];
  page.on("console", (message) => logs.push(`${message.type()}: ${message.text()}`));
  pages.push({ user, page, logs });
  await page.goto(`${app}/login?user=${user}`);
  const { say, ready } = chat(page);
  await ready();
  await say(text, `You said: ${text}`);
  return page.textContent("#thread");
}

try {
  const refused = await fetch(`${app}/api/copilotkit/info`);
  assert.equal(refused.status, 401, "the runtime serves signed-in users only");

  const alices = await chatAs("alice", "hello from alice");
  assert.deepEqual(await threadAs("alice", alices), { status: 200, said: ["hello from alice", "You said: hello from alice"] });
  assert.equal((await threadAs("bob", alices)).status, 404, "bob does not see alice's thread");
  console.log("ok a user's thread is theirs");

  const bobs = await chatAs("bob", "hello from bob", { "X-Agent-Tower-User": "alice" });
  assert.equal((await threadAs("bob", bobs)).status, 200, "bob's thread is bob's");
  assert.equal((await threadAs("alice", bobs)).status, 404, "not alice's, whatever bob's browser said");
  console.log("ok the browser cannot name another user");
  console.log("copilotkit-front: passed");
} catch (error) {
  mkdirSync(artifacts, { recursive: true });
  for (const { user, page, logs } of pages) {
    await page.screenshot({ path: join(artifacts, `copilotkit-front-${user}.png`), fullPage: true }).catch(() => {});
    console.error(`${user}'s page console:\n${logs.join("\n")}`);
  }
  throw error;
} finally {
  await browser.close();
}
