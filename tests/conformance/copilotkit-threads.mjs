// The thread list of the CopilotKit example, in two tabs of Debian's Chromium in front of
// `agent-tower serve`: a thread created in one tab appears in the other's list, a rename or an
// archive in one reaches the other, a click switches threads, a reload finds the list and the
// current thread as they were, and a delete empties both lists.
//
//   node copilotkit-threads.mjs http://127.0.0.1:PAGE_PORT
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browse, chat } from "./copilotkit-chat.mjs";

const [app] = process.argv.slice(2);
assert.ok(app, "usage: node copilotkit-threads.mjs <page url>");

const { browser, page: one, logs, failed } = await browse();
const two = await one.context().newPage();
two.on("console", (message) => logs.push(`two ${message.type()}: ${message.text()}`));

/** The titles `page`'s list shows, in order, once they are `expected`. */
async function listed(page, expected) {
  const titles = () =>
    page.evaluate(() => [...document.querySelectorAll("#threads li .title")].map((b) => b.textContent));
  await page
    .waitForFunction(
      (want) =>
        JSON.stringify([...document.querySelectorAll("#threads li .title")].map((b) => b.textContent)) ===
        JSON.stringify(want),
      expected,
      { timeout: 15_000 },
    )
    .catch(async () => assert.deepEqual(await titles(), expected, "the thread list"));
}

/** The entry of the thread titled `title` in `page`'s list. */
const entry = (page, title) =>
  page.locator("#threads li", { has: page.locator(".title", { hasText: title }) });

/** The button `name` of the thread titled `title` in `page`'s list. */
const action = (page, title, name) => entry(page, title).getByLabel(name);

try {
  const [first, second] = [randomUUID(), randomUUID()];
  await one.goto(`${app}/?thread=${first}`);
  await two.goto(`${app}/?thread=${second}`);
  await chat(one).ready();
  await chat(two).ready();
  await listed(one, []);
  await listed(two, []);

  // 1. A thread created in one tab appears in the other's list.
  await chat(one).say("hello from tab one", "You said: hello from tab one");
  await listed(two, ["hello from tab one"]);
  console.log("ok a new thread reached the other tab");

  // 2. Renamed in the second tab: the first tab's list follows.
  two.once("dialog", (dialog) => dialog.accept("Greetings"));
  await action(two, "hello from tab one", "rename").click();
  await listed(one, ["Greetings"]);
  await listed(two, ["Greetings"]);
  console.log("ok a rename reached the other tab");

  // 3. A second thread, newest first; archived in the first tab, gone from both lists.
  await chat(two).say("a second thread", "You said: a second thread");
  await listed(one, ["a second thread", "Greetings"]);
  await action(one, "a second thread", "archive").click();
  await listed(two, ["Greetings"]);
  await listed(one, ["Greetings"]);
  console.log("ok an archive reached the other tab");

  // 4. The second tab switches to the first thread: its conversation is shown.
  await entry(two, "Greetings").locator(".title").click();
  await two.waitForURL(`**/?thread=${first}`);
  await chat(two).ready();
  await two.getByText("You said: hello from tab one").waitFor();
  assert.equal(await two.textContent("#thread"), first);
  console.log("ok a click switched threads");

  // 5. A reload finds the list and the current thread as they were.
  await one.reload();
  await chat(one).ready();
  await listed(one, ["Greetings"]);
  assert.equal(await one.textContent("#thread"), first);
  await one.getByText("You said: hello from tab one").waitFor();
  assert.equal(await one.locator('#threads li[aria-current="page"] .title').textContent(), "Greetings");
  console.log("ok a reload found the list and the thread");

  // 6. Deleted in the first tab, which moves to a new thread: both lists are empty.
  await action(one, "Greetings", "delete").click();
  await one.waitForURL((url) => !url.search.includes(first));
  await listed(one, []);
  await listed(two, []);
  console.log("ok a delete reached the other tab");
  assert.deepEqual(logs.filter((line) => /error/.test(line.split(":")[0])), [], "the pages logged no error");
  console.log("copilotkit-threads: passed");
} catch (error) {
  await failed("copilotkit-threads");
  throw error;
} finally {
  await browser.close();
}
