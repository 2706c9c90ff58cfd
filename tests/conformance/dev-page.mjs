// The development page of `agent-tower serve` in a real browser (Debian's Chromium, driven by
// playwright-core), and CORS from a page on another origin.
//
//   node dev-page.mjs chat   http://127.0.0.1:PORT [screenshot.png]
//   node dev-page.mjs rejoin http://127.0.0.1:PORT           (reload, then Stop; the default settings)
//   node dev-page.mjs console http://127.0.0.1:PORT [screenshot.png] (a lead with a researcher)
//   node dev-page.mjs cors   http://127.0.0.1:PORT APP_ORIGIN OTHER_ORIGIN TOKEN
//
// What the page shows is checked against what the server logged (`GET /runs/{id}/events`), so
// the page cannot pass by showing something the server never sent. On failure a screenshot and
// the page's console are saved under target/browser-artifacts/.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { logged as loggedBy, text } from "./runs.mjs";

const [scenario, base, ...rest] = process.argv.slice(2);
assert.ok(scenario && base, "usage: node dev-page.mjs chat|rejoin|console|operations|cors <base url> …");
const artifacts = join(dirname(fileURLToPath(import.meta.url)), "../../target/browser-artifacts");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await context.newPage();
const console_ = [];
page.on("console", (message) => console_.push(`${message.type()}: ${message.text()}`));
page.on("pageerror", (error) => console_.push(`pageerror: ${error.message}`));

/** Every event the server logged for `runId` (the whole run: it waits for its end). */
const logged = (runId, headers = {}) => loggedBy(base, runId, headers);

async function send(message) {
  await page.fill("#message", message);
  await page.click("#send");
}

/** Waits until the page is no longer streaming; its status then. */
async function settled(timeout = 20_000) {
  const status = page.locator("#status");
  await page.waitForFunction(
    () => !["running", "re-joining", "stopping"].includes(document.getElementById("status").textContent),
    null,
    { timeout },
  );
  return { status: await status.textContent(), runId: await status.getAttribute("data-run-id") };
}

const lastAssistant = () => page.locator(".message.assistant").last().evaluate((li) => li.firstChild?.textContent ?? "");
const shownState = async () => JSON.parse(await page.textContent("#state"));

async function chat(screenshot) {
  // Loaded once the thread list was read (its live stream keeps the network busy).
  const listed = page.waitForResponse((response) => response.url().includes("/threads?"));
  await page.goto(`${base}/`);
  await listed;
  assert.equal(await page.title(), "agent-tower");
  // A new thread asks the server for nothing it cannot have (no 404 in the console).
  assert.deepEqual(console_.filter((line) => line.startsWith("error")), [], "a clean console");

  // A state delta reaching past the document (`__proto__`…) is refused, and pollutes nothing.
  const polluted = await page.evaluate(() => {
    const refused = [];
    for (const path of ["/__proto__/polluted", "/__proto__", "/constructor/prototype/polluted"]) {
      try {
        patch({}, [{ op: "add", path, value: { polluted: true } }]);
      } catch {
        refused.push(path);
      }
    }
    return { refused, polluted: {}.polluted ?? null, kept: patch({ a: 1 }, [{ op: "add", path: "/b", value: 2 }]) };
  });
  assert.deepEqual(polluted.refused.length, 3, JSON.stringify(polluted));
  assert.equal(polluted.polluted, null);
  assert.deepEqual(polluted.kept, { a: 1, b: 2 });

  // Reasoning, then text streamed token by token; what is shown is what the server sent.
  await send("think about this");
  let { status, runId } = await settled();
  assert.equal(status, "idle");
  const events = await logged(runId);
  assert.ok(events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").length > 1, "streamed in pieces");
  assert.equal(await lastAssistant(), text(events));
  assert.equal(await lastAssistant(), "You said: think about this");
  assert.match(await page.locator(".message.reasoning").last().textContent(), /Let me answer briefly/);
  console.log("ok text and reasoning");

  // A backend tool: its card with the arguments and the result, then the model's answer.
  await send('add {"a": 1, "b": 2}');
  ({ status } = await settled());
  assert.equal(status, "idle");
  const card = page.locator(".tool-call").last();
  assert.equal(await card.locator(".name").textContent(), "add");
  assert.deepEqual(JSON.parse(await card.locator(".args").textContent()), { a: 1, b: 2 });
  assert.equal(await card.locator(".result").textContent(), "3");
  assert.match(await lastAssistant(), /returned 3/);
  console.log("ok backend tool");

  // The reasoning of the first turn, shown once, is still the thread's after the next run.
  assert.equal(await page.locator(".message.reasoning").count(), 1, "the reasoning, once");
  const threadId = await page.evaluate(() => chat.threadId);
  const stored = await (await fetch(`${base}/threads/${threadId}`)).json();
  const reasoning = stored.messages.filter((m) => m.role === "reasoning");
  assert.equal(reasoning.length, 1, "the thread keeps it");
  assert.match(reasoning[0].content, /Let me answer briefly/);
  assert.ok((await page.locator(".message.reasoning").textContent()).includes(reasoning[0].content));
  console.log("ok reasoning shown once and kept");

  // Interrupts: approved, approved with edited arguments, rejected with feedback.
  const interrupted = async (message) => {
    await send(message);
    assert.equal((await settled()).status, "interrupted");
    const interrupt = page.locator(".interrupt");
    assert.equal(await interrupt.count(), 1);
    return interrupt;
  };
  let interrupt = await interrupted('remember {"key": "theme", "value": "dark"}');
  assert.deepEqual(JSON.parse(await interrupt.locator("textarea").inputValue()), { key: "theme", value: "dark" });
  assert.ok(await page.locator("#send").isDisabled(), "no new message while an interrupt waits");
  await interrupt.getByRole("button", { name: "Approve", exact: true }).click();
  ({ status, runId } = await settled());
  assert.equal(status, "idle");
  assert.equal((await shownState()).theme, "dark");
  assert.equal(await page.locator(".tool-call").last().locator(".result").textContent(), "remembered theme");
  assert.equal(await page.locator(".interrupt").count(), 0);
  console.log("ok interrupt approved");

  interrupt = await interrupted('remember {"key": "theme", "value": "dark"}');
  await interrupt.locator("textarea").fill('{"key": "theme", "value": "light"}');
  // Events arriving while the user edits (the thread followed, another screen) render the page
  // again: the edit stays.
  await page.evaluate(() => render());
  assert.equal(JSON.parse(await interrupt.locator("textarea").inputValue()).value, "light", "the edit survives a render");
  await interrupt.getByRole("button", { name: "Approve edited" }).click();
  ({ status, runId } = await settled());
  assert.equal(status, "idle");
  assert.equal((await shownState()).theme, "light");
  const finalState = (await logged(runId)).findLast((e) => e.type.startsWith("STATE_"));
  assert.ok(finalState, "the server sent the state it changed");
  console.log("ok interrupt edited");

  interrupt = await interrupted('remember {"key": "font", "value": "serif"}');
  await interrupt.locator("input.feedback").fill("not now");
  if (screenshot) await page.screenshot({ path: screenshot });
  await interrupt.getByRole("button", { name: "Reject", exact: true }).click();
  ({ status } = await settled());
  assert.equal(status, "idle");
  assert.equal((await shownState()).font, undefined, "the rejected call did not run");
  assert.match(await page.locator(".tool-call").last().locator(".result").textContent(), /not now/);
  console.log("ok interrupt rejected");

  // Approved "always": the tool's next call in this conversation runs without asking.
  interrupt = await interrupted('remember {"key": "font", "value": "serif"}');
  await interrupt.getByRole("button", { name: "Always approve" }).click();
  assert.equal((await settled()).status, "idle");
  assert.equal((await shownState()).font, "serif");
  await send('remember {"key": "font", "value": "mono"}');
  ({ status, runId } = await settled());
  assert.equal(status, "idle", "not asked again");
  assert.equal(await page.locator(".interrupt").count(), 0);
  assert.equal((await shownState()).font, "mono");
  assert.ok((await logged(runId)).some((e) => e.type === "TOOL_CALL_RESULT"), "the call ran on the server");
  console.log("ok interrupt approved always");

  // The state set in the page reaches the server with the next run.
  await page.click("details summary");
  await page.fill("#state-input", '{"mood": "calm"}');
  await page.click("#set-state");
  assert.equal((await shownState()).mood, "calm");
  await send("hello");
  ({ status, runId } = await settled());
  assert.equal(status, "idle");
  const snapshot = (await logged(runId)).find((e) => e.type === "STATE_SNAPSHOT");
  assert.deepEqual(snapshot.snapshot, { mood: "calm" }, "the server ran with the page's state");
  console.log("ok state set from the page");

  // Answers are Markdown, rendered as elements.
  await send("render **bold**, `code` and *emphasis*");
  await settled();
  const answer = page.locator(".message.assistant").last();
  assert.equal(await answer.locator("strong").textContent(), "bold");
  assert.equal(await answer.locator("code").textContent(), "code");
  assert.equal(await answer.locator("em").textContent(), "emphasis");
  assert.ok(!(await answer.textContent()).includes("**"), "no markup left");
  console.log("ok markdown");

  // The event log: one line per event, the whole event when opened, filtered by type.
  await page.fill("#event-filter", "RUN_");
  const kept = await page.$$eval("#events li:not([hidden])", (all) => all.map((li) => li.dataset.type));
  assert.ok(kept.length > 1 && kept.every((type) => type.startsWith("RUN_")), kept.join());
  const line = page.locator("#events li:not([hidden])").first();
  await line.locator("summary").click();
  assert.match(await line.locator("pre").textContent(), /"type": "RUN_/);
  await page.fill("#event-filter", "");
  console.log("ok event log");

  // A new thread starts empty.
  await page.click("#new-thread");
  assert.equal(await page.locator(".message").count(), 0);
}

async function rejoin() {
  await page.goto(`${base}/`);
  await send("tell me slowly");
  await page.waitForFunction(() => document.querySelector(".message.assistant")?.textContent.split(" ").length > 5);
  const before = await page.locator("#status").getAttribute("data-run-id");
  await page.reload();
  const { status, runId } = await settled(30_000);
  assert.equal(status, "idle");
  assert.equal(runId, before, "the page followed the same run after the reload");
  const events = await logged(runId);
  assert.equal(events.at(-1).type, "RUN_FINISHED", "the run went on while the page reloaded");
  assert.equal(await lastAssistant(), text(events), "no token lost or shown twice");
  // After the reload, the first event read is one after those seen before it.
  const first = await page.locator("#events li").last().textContent();
  const seq = Number(first.match(new RegExp(`${runId}:(\\d+)`))[1]);
  assert.ok(seq > 1, `the page re-joined after the events it had (first read: ${seq})`);
  console.log(`ok re-joined after a reload from event ${seq}`);

  // Stop: the run is cancelled on the server, not only hidden; the page follows it to its end.
  const answers = await page.locator(".message.assistant").count();
  await send("tell me slowly");
  await page.waitForFunction((before) => {
    const all = document.querySelectorAll(".message.assistant");
    return all.length > before && all[all.length - 1].textContent.split(" ").length > 3;
  }, answers);
  await page.click("#stop");
  const stopped = await settled();
  assert.equal(stopped.status, "cancelled", "the page shows the run's real end");
  const stoppedRun = await logged(stopped.runId);
  const ended = stoppedRun.at(-1);
  assert.equal(ended.type, "RUN_FINISHED");
  assert.deepEqual(ended.outcome, { type: "cancelled" }, "the server cancelled the stopped run");
  const words = text(stoppedRun).split(" ").length;
  assert.ok(words < 150, `cancelled early (${words} words of 200)`);
  assert.equal(await lastAssistant(), text(stoppedRun), "the page shows every token the run sent");
  console.log(`ok stop: the server cancelled the run after ${words} words`);

  // Another device (no local copy, a phone's width) opens the thread: the server restores it.
  const threadId = await page.evaluate(() => JSON.parse(localStorage.getItem("agent-tower")).threadId);
  const phone = await (await browser.newContext({ viewport: { width: 390, height: 800 } })).newPage();
  await phone.goto(`${base}/?thread=${threadId}`);
  await phone.waitForFunction(() => document.querySelectorAll(".message.assistant").length > 0);
  const shown = (p) =>
    p.$$eval(".message.user, .message.assistant", (all) => all.map((m) => [m.className, m.firstChild?.textContent ?? ""]));
  assert.deepEqual(await shown(phone), await shown(page), "the same conversation on the other device");
  const width = await phone.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `nothing wider than the phone (${width}px)`);
  console.log("ok another device restored the thread from the server");

  // Both screens stay open on the thread: what one sends shows on the other as it streams, with
  // no reload, and each can go on from there.
  for (const [from, to, said] of [
    [page, phone, "hello from the laptop"],
    [phone, page, "hello from the phone"],
  ]) {
    await from.fill("#message", said);
    await from.click("#send");
    const answer = (p) => p.locator(".message.assistant", { hasText: `You said: ${said}` });
    await answer(to).waitFor({ timeout: 15_000 }); // one answer, no copy
    await answer(from).waitFor();
    await to.waitForFunction(() => document.querySelector("#status").textContent === "idle");
    assert.deepEqual(await shown(to), await shown(from), `the other screen shows "${said}" in its place`);
  }
  const kept = await (await fetch(`${base}/threads/${threadId}`)).json();
  assert.deepEqual(
    kept.messages.filter((m) => m.role === "user").slice(-2).map((m) => m.content),
    ["hello from the laptop", "hello from the phone"],
    "both turns kept, in order",
  );
  console.log("ok a second screen follows the thread live and goes on from it");

  // The phone loses its connection to the thread and misses a turn: what it sends then is
  // refused and it is shown the thread; no turn is lost, and sent again, it is answered.
  await phone.route(/follow=true/, (route) => route.abort());
  await phone.evaluate(() => unfollow());
  await send("while the phone is away");
  const shownOn = (p, said) => p.locator(".message.assistant", { hasText: `You said: ${said}` });
  await shownOn(page, "while the phone is away").waitFor({ timeout: 15_000 });
  await phone.fill("#message", "from the stale phone");
  await phone.click("#send");
  await shownOn(phone, "while the phone is away").waitFor({ timeout: 15_000 });
  assert.match(await phone.textContent("#error"), /thread_conflict/);
  // The laptop followed the refused run to its end, and shows no error of it.
  await page.waitForFunction(() => document.querySelector("#events li")?.dataset.type === "RUN_ERROR");
  assert.ok(await page.locator("#error").isHidden(), "the refusal is the phone's to show, not the laptop's");
  assert.equal(await page.textContent("#status"), "idle");
  await phone.unroute(/follow=true/);
  await phone.fill("#message", "from the phone, again");
  await phone.click("#send");
  await shownOn(phone, "from the phone, again").waitFor({ timeout: 15_000 });
  const after = await (await fetch(`${base}/threads/${threadId}`)).json();
  assert.deepEqual(
    after.messages.filter((m) => m.role === "user").slice(-4).map((m) => m.content),
    ["hello from the laptop", "hello from the phone", "while the phone is away", "from the phone, again"],
    "the stale screen erased no turn, and its refused one was not kept",
  );
  await shownOn(page, "from the phone, again").waitFor({ timeout: 15_000 });
  console.log("ok a stale screen is refused, shown the thread, and goes on from it");

  // The thread list, on both screens: a thread begun on one is listed on the other at once, on
  // top; the other opens it from there; a name, the archive and a deletion show on both.
  const listed = (p) => p.$$eval("#threads li", (all) => all.map((li) => [li.dataset.threadId, li.querySelector(".open").textContent]));
  const item = (p, id) => p.locator(`#threads li[data-thread-id="${id}"]`);
  await item(phone, threadId).waitFor();
  assert.equal(await item(phone, threadId).locator(".open").textContent(), "tell me slowly", "titled by its first prompt");
  await page.click("#new-thread");
  await send("a second topic");
  await shownOn(page, "a second topic").waitFor({ timeout: 15_000 });
  const second = await page.evaluate(() => JSON.parse(localStorage.getItem("agent-tower")).threadId);
  await phone.waitForFunction((id) => document.querySelector("#threads li")?.dataset.threadId === id, second);
  assert.deepEqual(
    await listed(phone),
    [
      [second, "a second topic"],
      [threadId, "tell me slowly"],
    ],
    "the phone's list shows the laptop's new thread on top, with no reload",
  );
  await item(phone, second).locator(".open").click();
  await shownOn(phone, "a second topic").waitFor({ timeout: 15_000 });
  assert.equal(await phone.locator(".message.user").count(), 1, "the phone opened the other thread");
  assert.equal(await phone.textContent("#thread"), second);

  page.once("dialog", (dialog) => dialog.accept("Second, named"));
  await item(page, second).locator(".rename").click();
  await phone.waitForFunction((id) => document.querySelector(`#threads li[data-thread-id="${id}"] .open`)?.textContent === "Second, named", second);
  await item(page, threadId).locator(".archive").click();
  await item(phone, threadId).waitFor({ state: "detached" });
  await phone.check("#show-archived");
  assert.deepEqual(await listed(phone), [[threadId, "tell me slowly"]], "the archive holds it");
  page.once("dialog", (dialog) => dialog.accept());
  await page.check("#show-archived");
  await item(page, threadId).locator(".delete").click();
  await item(phone, threadId).waitFor({ state: "detached" });
  assert.equal((await fetch(`${base}/threads/${threadId}`)).status, 404, "deleted on the server");
  console.log("ok the thread list: listed live, opened, named, archived and deleted on both screens");
}

async function cors([app, other, token]) {
  const run = async (origin) => {
    await page.goto(`${origin}/`);
    return page.evaluate(
      async ({ base, token }) => {
        const auth = { Authorization: `Bearer ${token}` };
        const runId = crypto.randomUUID();
        const body = JSON.stringify({
          threadId: crypto.randomUUID(),
          runId,
          messages: [{ id: "u1", role: "user", content: "hello" }],
          tools: [],
          context: [],
          state: {},
          forwardedProps: {},
        });
        try {
          const started = await fetch(`${base}/`, {
            method: "POST",
            headers: { ...auth, "Content-Type": "application/json", Accept: "text/event-stream" },
            body,
          });
          const all = await started.text();
          const again = await fetch(`${base}/runs/${runId}/events`, {
            headers: { ...auth, Accept: "text/event-stream", "Last-Event-ID": `${runId}:2` },
          });
          return { status: started.status, all, again: again.status, rest: await again.text(), runId };
        } catch (error) {
          return { error: String(error) };
        }
      },
      { base, token },
    );
  };
  const allowed = await run(app);
  assert.equal(allowed.error, undefined, `a page on ${app} may call the server`);
  assert.equal(allowed.status, 200);
  assert.match(allowed.all, /RUN_FINISHED/);
  assert.equal(allowed.again, 200, "Last-Event-ID and Authorization pass the preflight");
  const ids = [...allowed.rest.matchAll(/^id: .*:(\d+)$/gm)].map((m) => Number(m[1]));
  assert.equal(ids[0], 3, "the re-join starts after the event named");
  console.log(`ok ${app} started a run and re-joined it (${ids.length} events after 2)`);

  const refused = await run(other);
  assert.match(refused.error ?? "", /Failed to fetch/, `a page on ${other} may not`);
  console.log(`ok ${other} is refused`);
}

/** The console: a lead whose researcher (a sub-agent) asks before `remember`, in two threads;
 * both interrupts wait in the inbox and are answered there; the first thread's runs drawn as
 * timelines, checked against what the server logged. */
async function consoleScenario(screenshot) {
  const listing = page.waitForResponse((response) => response.url().includes("/threads?"));
  await page.goto(`${base}/`);
  await listing;
  const threadOf = () => page.evaluate(() => chat.threadId);

  // Thread A: the researcher is asked to remember; its call waits for a person.
  const task = 'remember {"key": "theme", "value": "dark"}';
  await send(`researcher ${JSON.stringify({ task })}`);
  assert.equal((await settled()).status, "interrupted");
  const threadA = await threadOf();
  // Thread B: the lead itself asks, with arguments that look like markup.
  await page.click("#new-thread");
  await send('publish {"title": "<img src=x onerror=alert(1)>"}');
  assert.equal((await settled()).status, "interrupted");
  const threadB = await threadOf();

  const waiting = page.locator("#inbox li[data-interrupt-id]");
  const count = (n) =>
    page.waitForFunction((n) => document.querySelectorAll("#inbox li[data-interrupt-id]").length === n, n);
  await count(2);
  const inThreads = await waiting.evaluateAll((items) => items.map((item) => item.dataset.threadId));
  assert.deepEqual(inThreads.sort(), [threadA, threadB].sort(), "one interrupt of each thread");
  const itemB = page.locator(`#inbox li[data-thread-id="${threadB}"]`);
  assert.match(await itemB.locator("code").textContent(), /<img src=x onerror=alert\(1\)>/);
  assert.equal(await page.locator("#inbox img").count(), 0, "arguments shown as text, never markup");
  console.log("ok the pending interrupts of two threads");

  // Thread A's, answered from the inbox while thread B is open: A goes on in a run of its own.
  await page.locator(`#inbox li[data-thread-id="${threadA}"]`).getByRole("button", { name: "Approve" }).click();
  await count(1);
  const runsOf = async (threadId) => (await (await fetch(`${base}/threads/${threadId}`)).json()).runs;
  let runs = await runsOf(threadA);
  assert.equal(runs.length, 2, "the answer resumed thread A");
  const [first, second] = await Promise.all(runs.map((run) => logged(run.runId)));
  assert.equal(second.at(-1).type, "RUN_FINISHED");
  assert.equal(second.at(-1).outcome.type, "success");
  console.log("ok answered in the inbox: the thread went on");

  // Thread A's runs, drawn.
  await page.locator(`#threads li[data-thread-id="${threadA}"] .open`).click();
  await page.click("#view-runs");
  const drawn = (runId) => page.locator(`#runs figure[data-run-id="${runId}"]`);
  await page.waitForFunction(
    (ids) => ids.every((id) => document.querySelector(`#runs figure[data-run-id="${id}"]:not(.running)`)),
    runs.map((run) => run.runId),
  );
  for (const [run, events] of [[runs[0], first], [runs[1], second]]) {
    // Every logged event but a stream's fragments says when it happened.
    const untimed = events.filter((e) => e.timestamp === undefined).map((e) => e.type);
    assert.ok(untimed.every((type) => /_(CONTENT|ARGS)$/.test(type)), `untimed: ${untimed}`);
    const rows = await drawn(run.runId).locator("g.row").evaluateAll((groups) =>
      groups.map((g) => ({
        kind: g.dataset.kind,
        id: g.dataset.id,
        label: g.querySelector(".label").textContent,
        detail: g.querySelector(".detail").textContent,
        x: Number(g.querySelector(".bar").getAttribute("x")),
        waits: g.querySelector(".waits") !== null,
      })),
    );
    const of = (type) => events.filter((e) => e.type === type);
    const steps = rows.filter((row) => row.kind === "step");
    assert.deepEqual(steps.map((row) => row.label), of("STEP_STARTED").map((e) => e.stepName), "a row per step");
    // Each step says what its model call used, as the call's usage event logged it.
    const used = of("CUSTOM").filter((e) => e.name === "agent_tower.usage");
    assert.equal(used.length, steps.length, "a usage event per model call");
    steps.forEach((row, i) =>
      assert.ok(row.detail.includes(`${used[i].value.inputTokens} in / ${used[i].value.outputTokens} out tokens`), row.detail));
    const called = new Set([...of("TOOL_CALL_START"), ...of("TOOL_CALL_RESULT")].map((e) => e.toolCallId));
    assert.deepEqual(new Set(rows.filter((row) => row.kind === "tool").map((row) => row.id)), called, "a row per tool call");
    assert.deepEqual(
      rows.filter((row) => row.kind === "subagent").map((row) => row.label),
      of("SUBAGENT_STARTED").map((e) => `⤷ ${e.name}`),
      "a row per sub-agent run",
    );
    // Drawn against time: the bars start in the order their events happened.
    assert.deepEqual(rows.map((row) => row.x), rows.map((row) => row.x).toSorted((a, b) => a - b));
    // The run's length, from its first and last events' times.
    const length = await page.evaluate(([a, b]) => duration(b - a), [events[0].timestamp, events.at(-1).timestamp]);
    assert.match(await drawn(run.runId).locator("figcaption").textContent(), new RegExp(` in ${length}`));
  }
  // The first run: the researcher's call, its run nested under it, and the call it waits on.
  const firstRows = await drawn(runs[0].runId).locator("g.row").evaluateAll((groups) =>
    groups.map((g) => `${g.dataset.kind} ${g.querySelector(".label").textContent}${g.querySelector(".waits") ? " waits" : ""}`));
  assert.deepEqual(firstRows, ["step turn 0", "tool researcher()", "subagent ⤷ researcher", "step turn 0", "tool remember() waits"]);
  assert.match(await drawn(runs[0].runId).locator("figcaption").textContent(), /interrupt/);
  assert.equal(await drawn(runs[1].runId).locator(".answer").textContent(), "answers remember: approved");
  console.log("ok the runs drawn as timelines: steps with tokens, tool calls, a sub-agent, an interrupt and its answer");
  if (screenshot) await drawn(runs[0].runId).locator("xpath=..").screenshot({ path: screenshot });

  // Thread B's, rejected from the inbox: nothing waits any more.
  await itemB.getByRole("button", { name: "Reject" }).click();
  await count(0);
  runs = await runsOf(threadB);
  const answered = (await logged(runs[1].runId))[0].input.resume;
  assert.deepEqual(answered.map((entry) => entry.payload), [{ approved: false }]);
  console.log("ok rejected in the inbox");
}

/** The schedules and the webhooks, as an operator's console lists them: a schedule every second
 * whose runs' ends go to a receiver that is not there. */
async function operations() {
  await page.goto(`${base}/`);
  // Read again (the inbox's refresh reads both lists) until `done`, a response at a time.
  const refreshUntil = async (done, route) => {
    while (!(await done())) {
      const read = page.waitForResponse((response) => response.url().includes(route));
      await page.click("#refresh-inbox");
      await read;
    }
  };
  // A schedule that began a run says so; its run's end is a webhook not delivered yet.
  const ran = page.locator('#schedules li[data-schedule="tick"] .last[data-run-id]');
  await refreshUntil(async () => (await ran.count()) > 0, "/schedules");
  const runId = await ran.getAttribute("data-run-id");
  assert.match(runId, /^tick-\d+000$/, "the run of an occurrence, on its second");
  assert.match(await page.textContent('#schedules li[data-schedule="tick"] code'), /\* \* \* \* \* \*/);
  assert.match(await page.textContent('#schedules li[data-schedule="tick"] .next'), /^next (in \d|due now)/);
  console.log("ok a schedule with its next occurrence and the run its last one began");
  const told = page.locator(`#webhooks li[data-run-id="${runId}"]`);
  await refreshUntil(async () => (await told.count()) > 0 && (await told.locator(".error").count()) > 0, "/webhooks?");
  assert.match(await told.locator("strong").textContent(), /^run\.finished (pending|failed)$/);
  assert.match(await told.textContent(), /1 attempt|attempts/);
  assert.ok((await told.locator(".error").textContent()).length > 0, "why it was not delivered");
  console.log("ok the webhook of its end, not delivered, with why");
}

try {
  if (scenario === "chat") await chat(rest[0]);
  else if (scenario === "operations") await operations();
  else if (scenario === "console") await consoleScenario(rest[0]);
  else if (scenario === "rejoin") await rejoin();
  else if (scenario === "cors") await cors(rest);
  else throw new Error(`unknown scenario ${scenario}`);
  console.log(`${scenario}: passed`);
} catch (error) {
  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, `${scenario}.png`), fullPage: true }).catch(() => {});
  console.error(`page console:\n${console_.join("\n")}`);
  console.error(`screenshot: ${join(artifacts, `${scenario}.png`)}`);
  throw error;
} finally {
  await browser.close();
}
