// CopilotKit (react-core 1.74 in Debian's Chromium, runtime 1.75 with `@agent-tower/client`'s
// agent and runner) in front of `agent-tower serve`: the example in examples/copilotkit, driven
// by playwright-core.
//
//   node copilotkit.mjs http://127.0.0.1:PAGE_PORT http://127.0.0.1:AGENT_PORT OPERATOR_TOKEN \
//     http://127.0.0.1:OTHER_PAGE_PORT (a second runtime in front of the same agent-tower)
//
// (Answers are Markdown in the page: `add` shows as "add".) What the page shows is checked against the thread the server kept (`GET /threads/{id}`, with
// an operator token): chat with reasoning, a backend tool, a frontend tool run in the page and
// its result read by the model, the state set in the page, interrupts approved, edited and
// rejected through `useInterrupt`, Stop cancelling the run on the server, and reloads mid-run
// and while an approval waits (the page restored from the server). On failure a
// screenshot and the page's console are saved under target/browser-artifacts/.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { browse, chat } from "./copilotkit-chat.mjs";
import { logged as loggedBy, text } from "./runs.mjs";

const [app, agent, token, otherApp] = process.argv.slice(2);
assert.ok(
  app && agent && token && otherApp,
  "usage: node copilotkit.mjs <page url> <agent url> <operator token> <another runtime's page url>",
);

const { browser, page, failed } = await browse();

/** The thread as the server kept it. */
async function thread() {
  const id = await page.textContent("#thread");
  const response = await fetch(`${agent}/threads/${id}`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(response.status, 200, `the server has thread ${id}`);
  return response.json();
}

/** Every event the server logged for `runId` (waits for the run's end). */
const logged = (runId) => loggedBy(agent, runId, { Authorization: `Bearer ${token}` });

/** The thread once none of its runs is running: each running run's events are followed to its end. */
async function settled() {
  const auth = { Authorization: `Bearer ${token}` };
  for (const run of (await thread()).runs.filter((r) => r.status === "running")) {
    await (await fetch(`${agent}/runs/${run.runId}/events`, { headers: auth })).text();
  }
  return thread();
}

const { send, another, say, ready } = chat(page);

const toolResult = (seen, content) => seen.messages.some((m) => m.role === "tool" && m.content === content);

try {
  await page.goto(`${app}/`);
  await ready();

  // The runtime shows pages what agent-tower declares (`AgentTowerAgent.getCapabilities()`).
  const info = await (await fetch(`${app}/api/copilotkit/info`)).json();
  const capabilities = info.agents?.default?.capabilities;
  assert.equal(capabilities?.transport?.resumable, true, JSON.stringify(info));
  assert.ok(capabilities.tools.items.some((tool) => tool.name === "remember"));
  assert.equal(capabilities.humanInTheLoop.interrupts, true);
  console.log("ok capabilities through the runtime");

  await say("think about this", "You said: think about this");
  await page.getByText("Let me answer briefly").first().waitFor();
  console.log("ok chat with reasoning");

  await say('add {"a": 1, "b": 2}', /The add tool returned 3\./);
  assert.ok(toolResult(await settled(), "3"), "the server ran add");
  console.log("ok backend tool");

  await say('set_background {"color": "lightblue"}', /The set_background tool returned background set to lightblue\./);
  assert.equal(await page.textContent("#background"), "background: lightblue", "the tool ran in the page");
  assert.ok(toolResult(await settled(), "background set to lightblue"), "the page's result reached the server");
  console.log("ok frontend tool");

  await page.click("#set-mood");
  await say("hello", "You said: hello");
  assert.equal((await settled()).state?.mood, "calm", "the state set in the page reached the server");
  console.log("ok state set in the page");

  const approve = async (message, decide, expect) => {
    const cards = await page.locator(".approval").count();
    const answers = await page.getByText(expect).count();
    await say(message);
    const card = page.locator(".approval").nth(cards);
    await card.waitFor();
    await decide(card);
    await another(page.getByText(expect), answers);
  };
  await approve(
    'remember {"key": "theme", "value": "dark"}',
    (card) => card.getByRole("button", { name: "Approve", exact: true }).click(),
    /The remember tool returned remembered theme\./,
  );
  let seen = await settled();
  assert.equal(seen.state.theme, "dark");
  assert.deepEqual(seen.pendingInterrupts, []);
  await page.getByText('"theme": "dark"').waitFor();
  console.log("ok interrupt approved");

  await approve(
    'remember {"key": "theme", "value": "dark"}',
    async (card) => {
      await card.getByLabel("arguments").fill('{"key": "theme", "value": "light"}');
      await card.getByRole("button", { name: "Approve edited" }).click();
    },
    /The remember tool returned remembered theme\./,
  );
  assert.equal((await settled()).state.theme, "light", "the edited arguments ran");
  await page.getByText('"theme": "light"').waitFor();
  console.log("ok interrupt edited");

  await approve(
    'remember {"key": "font", "value": "serif"}',
    async (card) => {
      await card.getByLabel("feedback").fill("not now");
      await card.getByRole("button", { name: "Reject" }).click();
    },
    /The remember tool failed: .*not now/,
  );
  seen = await settled();
  assert.equal(seen.state.font, undefined, "the rejected call did not run");
  assert.deepEqual(seen.pendingInterrupts, []);
  console.log("ok interrupt rejected");

  await approve(
    'remember {"key": "font", "value": "serif"}',
    (card) => card.getByRole("button", { name: "Always approve" }).click(),
    /The remember tool returned remembered font\./,
  );
  assert.equal((await settled()).state.font, "serif");
  const cards = await page.locator(".approval").count();
  await say('remember {"key": "font", "value": "mono"}', /The remember tool returned remembered font\./);
  seen = await settled();
  assert.equal(seen.state.font, "mono", "the next call ran");
  assert.deepEqual(seen.pendingInterrupts, []);
  assert.equal(await page.locator(".approval").count(), cards, "without asking");
  console.log("ok interrupt approved always");

  await say("tell me slowly", /^lorem elit/);
  await send.click(); // the same button stops a run in flight
  const runs = (await settled()).runs;
  assert.equal(runs.at(-1).status, "cancelled", "Stop cancelled the run on the server");
  console.log("ok stop cancelled the run on the server");

  // A reload mid-run, through another runtime (which has never seen the thread): the page gets
  // the conversation back from agent-tower and re-joins the run, which streams on to its end.
  const threadId = await page.textContent("#thread");
  await say("tell me slowly and then some", /^lorem elit/);
  const inFlight = (await thread()).runs.at(-1);
  assert.equal(inFlight.status, "running");
  await page.goto(`${otherApp}/?thread=${threadId}`);
  await ready();
  assert.equal(await page.textContent("#thread"), threadId, "the same thread after the reload");
  const full = text(await logged(inFlight.runId));
  await page.waitForFunction((tail) => document.body.innerText.includes(tail), full.slice(-80), {
    timeout: 30_000,
  });
  await page.getByText("tell me slowly and then some").first().waitFor();
  await page.getByText("You said: hello").first().waitFor();
  assert.equal((await thread()).runs.at(-1).status, "finished", "the run went on through the reload");
  const shown = await page.evaluate(() => document.body.innerText);
  assert.ok(
    shown.indexOf("You said: hello") < shown.indexOf("tell me slowly and then some"),
    "the turns before the run come before its question",
  );
  console.log("ok reloaded mid-run through another runtime: the conversation came back in order and the answer streamed to its end");

  // A reload while an approval waits: the card comes back, and answering it there runs the tool
  // (on a new thread: this one approves `remember` always).
  await page.evaluate(() => localStorage.removeItem("agent-tower-thread"));
  await page.goto(`${otherApp}/`);
  await ready();
  assert.notEqual(await page.textContent("#thread"), threadId, "a new thread");
  const before = await page.getByText(/The remember tool returned remembered mood\./).count();
  await say('remember {"key": "mood", "value": "bold"}');
  await page.locator(".approval").last().waitFor();
  assert.equal((await thread()).pendingInterrupts.length, 1);
  await page.reload();
  await ready();
  const card = page.locator(".approval").last();
  await card.waitFor({ timeout: 15_000 });
  await card.getByRole("button", { name: "Approve", exact: true }).click();
  await another(page.getByText(/The remember tool returned remembered mood\./), before);
  seen = await settled();
  assert.equal(seen.state.mood, "bold", "approved from the reloaded page");
  assert.deepEqual(seen.pendingInterrupts, []);
  console.log("ok reloaded while an approval waited: the card came back and its answer ran the tool");

  // A page on another site cannot drive the agent through the runtime, not even with the
  // `text/plain` POST a browser sends without asking first.
  for (const headers of [{ "Sec-Fetch-Site": "cross-site" }, { Origin: "http://elsewhere.example" }]) {
    const forged = await fetch(`${app}/api/copilotkit/agent/default/run`, {
      method: "POST",
      headers: { "Content-Type": "text/plain", ...headers },
      body: JSON.stringify({ threadId: "forged", runId: "forged", messages: [] }),
    });
    assert.equal(forged.status, 403, JSON.stringify(headers));
  }
  const forgedThread = await fetch(`${agent}/threads/forged`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(forgedThread.status, 404, "no run reached the agent");
  console.log("ok a cross-site request to the runtime is refused");

  // An image in an answer is not fetched from elsewhere (the page's Content-Security-Policy).
  let beacons = 0;
  const beacon = createServer((req, res) => void (beacons++, res.writeHead(200, { "content-type": "image/png" }).end()));
  await new Promise((resolve) => beacon.listen(0, "127.0.0.1", resolve));
  const image = `http://127.0.0.1:${beacon.address().port}/seen.png`;
  assert.match((await fetch(`${app}/`)).headers.get("content-security-policy") ?? "", /img-src 'self' data:/);
  await page.evaluate(() => {
    window.blocked = [];
    document.addEventListener("securitypolicyviolation", (e) => window.blocked.push(e.blockedURI));
  });
  await say(`look ![seen](${image})`);
  await page.waitForFunction((url) => window.blocked.includes(url), image);
  assert.equal(beacons, 0, "the image was not fetched");
  beacon.close();
  console.log("ok an image in an answer is not fetched");
  console.log("copilotkit: passed");
} catch (error) {
  await failed("copilotkit");
  throw error;
} finally {
  await browser.close();
}
