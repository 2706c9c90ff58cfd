// The CopilotKit example without `@agent-tower/client` (`AGENT_CLIENT=ag-ui`: the official
// `HttpAgent` and CopilotKit's own in-memory runner), in Debian's Chromium, in front of
// `agent-tower serve`: Stop in the page ends the run on the server, cancelled, and the next
// message is answered and kept after the others.
//
//   node copilotkit-plain.mjs http://127.0.0.1:PAGE_PORT http://127.0.0.1:AGENT_PORT OPERATOR_TOKEN
import assert from "node:assert/strict";
import { browse, chat } from "./copilotkit-chat.mjs";
import { logged, text } from "./runs.mjs";

const [app, agent, token] = process.argv.slice(2);
assert.ok(app && agent && token, "usage: node copilotkit-plain.mjs <page url> <agent url> <operator token>");
const auth = { Authorization: `Bearer ${token}` };

const { browser, page, logs, failed } = await browse();

/** The thread as the server kept it, once none of its runs is running. */
async function settled() {
  const id = await page.textContent("#thread");
  const read = async () => (await fetch(`${agent}/threads/${id}`, { headers: auth })).json();
  for (const run of (await read()).runs.filter((r) => r.status === "running")) {
    await logged(agent, run.runId, auth);
  }
  return read();
}

const { send, say, ready } = chat(page);
// What the runtime answered the page's Stop, for a failure's report.
page.on("response", async (response) => {
  if (response.url().includes("/stop/")) logs.push(`stop: ${response.status()} ${await response.text()}`);
});
page.on("request", (request) => {
  if (request.url().includes("/api/")) logs.push(`request: ${request.method()} ${request.url()} ${request.postData()?.slice(0, 120) ?? ""}`);
});
try {
  await page.goto(`${app}/`);
  await ready();
  // The runtime's agent is the plain one: it declares nothing of agent-tower's.
  const info = await (await fetch(`${app}/api/copilotkit/info`)).json();
  assert.equal(info.agents?.default?.capabilities?.transport?.resumable, undefined, JSON.stringify(info));

  await say("hello one", "You said: hello one");
  // A long answer (600 words, 30 s): Stop lands in it however slowly a loaded machine renders.
  await say("tell me slowly and then some", /^lorem elit/);
  await send.click(); // the same button stops a run in flight
  const stopped = (await settled()).runs.at(-1);
  assert.equal(stopped.status, "cancelled", "Stop cancelled the run on the server");
  const streamed = text(await logged(agent, stopped.runId, auth));
  assert.ok(streamed.startsWith("lorem "), streamed);
  console.log(`ok stop cancelled the run on the server after ${streamed.split(" ").length - 1} words`);

  await say("hello again", "You said: hello again");
  const seen = await settled();
  assert.equal(seen.runs.at(-1).status, "finished", "the next message was answered");
  assert.deepEqual(
    seen.messages.filter((m) => m.role === "user").map((m) => m.content),
    ["hello one", "tell me slowly and then some", "hello again"],
    "the thread keeps the turns in order",
  );
  const shown = await page.evaluate(() => document.body.innerText);
  assert.ok(shown.indexOf("tell me slowly and then some") < shown.indexOf("You said: hello again"), shown);
  console.log("ok the next message was answered and kept after the stopped one");
  assert.deepEqual(logs.filter((line) => line.startsWith("error")), [], "the page logged no error");
  console.log("copilotkit-plain: passed");
} catch (error) {
  await failed("copilotkit-plain");
  throw error;
} finally {
  await browser.close();
}
