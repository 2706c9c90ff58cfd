// The console of the development page: what the agent did, drawn.
//
// - Runs: each run of the open thread as a timeline, read from its log (`GET /threads/{id}` for
//   the runs, `GET /runs/{id}/events` for each): its steps with what the model call used
//   (`agent_tower.usage`: tokens, cost) and its time to the first output; its tool calls with
//   their arguments, results and time; the interrupts it stopped at and the answers the next run
//   brought, and who answered them; sub-agent runs nested under the call that started them;
//   takeovers by another process. A run in progress is drawn as its events arrive.
// - Waiting for a person: the pending interrupts of every thread the caller may see
//   (`GET /interrupts?status=pending`, an operator's route when the server has tokens), answered
//   there (`POST /interrupts/{id}/resolve`): the thread goes on in a run of its own.
// - Schedules (`GET /schedules`: each with its next occurrence and the run its last one began)
//   and the latest webhooks (`GET /webhooks`: what each told, delivered or not, its attempts),
//   both operators' routes, read again with the inbox.
//
// It reads only the routes any client has. Nothing a model or a tool wrote is read as markup:
// every text goes in as a text node (SVG included). Loaded before app.js, whose helpers (`$`,
// `el`, `headers`, `readFrames`, `refusal`, `showError`, `chat`, `threads`) it uses once that has
// run: app.js calls `startConsole()` last.
"use strict";

/** The most runs of a thread drawn (the latest). */
const RUNS_DRAWN = 20;
/** How much of a tool call's arguments or result a tooltip shows. */
const SHOWN_CHARS = 600;
const SVG = "http://www.w3.org/2000/svg";

/** The runs drawn: `{ runId, status, events }` each, and what loads them. */
let drawn = { threadId: null, runs: [], first: 0, controller: null };
let drawPending = false;

// ---------------------------------------------------------------------------------------------
// A run's log, as a timeline

/** The timeline of one run from its logged events: `{ start, end, rows, interrupts, answers,
 * usage, cost, ended, error, timed }`. Times are the events' `timestamp`s (milliseconds); a log
 * written before events carried one is drawn in the order of its events instead (`timed`
 * false). `names`: the tools of the calls earlier runs made, by call id, for the results this
 * run brings them (learning this run's). */
function timeline(events, names = new Map()) {
  const timed = events.some((e) => e.timestamp !== undefined);
  const run = {
    start: undefined, end: undefined, rows: [], interrupts: [], answers: [], takeovers: [],
    usage: [], cost: null, ended: null, error: null, timed,
  };
  // Rows by what names them: the open step of each (sub-)run, tool calls, sub-agent runs.
  const steps = new Map();
  const calls = new Map();
  const subagents = new Map();
  const depth = (e) => subagents.get(e.subagentRunId)?.depth ?? 0;
  events.forEach((e, index) => {
    const at = timed ? e.timestamp : index;
    if (at !== undefined) {
      run.start ??= at;
      run.end = Math.max(run.end ?? at, at);
    }
    const lane = e.subagentRunId ?? "";
    const step = steps.get(lane);
    switch (e.type) {
      case "RUN_STARTED":
        run.answers = e.input?.resume ?? [];
        break;
      case "STEP_STARTED": {
        const row = { kind: "step", name: e.stepName, start: at, end: undefined, first: undefined, usage: null, depth: depth(e) };
        steps.set(lane, row);
        run.rows.push(row);
        break;
      }
      case "STEP_FINISHED":
        if (step) step.end = at;
        steps.delete(lane);
        break;
      case "TEXT_MESSAGE_START":
      case "REASONING_START":
        if (step) step.first ??= at;
        break;
      case "TOOL_CALL_START": {
        if (step) step.first ??= at;
        const row = {
          kind: "tool", name: e.toolCallName, id: e.toolCallId, start: at, argsEnd: undefined,
          end: undefined, args: "", result: null, waits: null, depth: depth(e),
        };
        calls.set(e.toolCallId, row);
        names.set(e.toolCallId, e.toolCallName);
        run.rows.push(row);
        break;
      }
      case "TOOL_CALL_ARGS": {
        const row = calls.get(e.toolCallId);
        if (row) row.args += e.delta;
        break;
      }
      case "TOOL_CALL_END": {
        const row = calls.get(e.toolCallId);
        if (row) row.argsEnd = at;
        break;
      }
      case "TOOL_CALL_RESULT": {
        let row = calls.get(e.toolCallId);
        if (!row) {
          // A call made by an earlier run (answered after an interrupt): its result is this run's.
          row = { kind: "tool", name: names.get(e.toolCallId) ?? e.toolCallId, id: e.toolCallId, start: at, argsEnd: at, end: undefined, args: "", result: null, waits: null, depth: depth(e) };
          calls.set(e.toolCallId, row);
          run.rows.push(row);
        }
        row.end = at;
        row.result = e.content;
        break;
      }
      case "SUBAGENT_STARTED": {
        const parent = subagents.get(e.parentSubagentRunId)?.depth ?? 0;
        const row = { kind: "subagent", name: e.name, id: e.subagentRunId, start: at, end: undefined, outcome: null, depth: parent + 1 };
        subagents.set(e.subagentRunId, row);
        run.rows.push(row);
        break;
      }
      case "SUBAGENT_FINISHED":
      case "SUBAGENT_ERROR": {
        const row = subagents.get(e.subagentRunId);
        if (!row) break;
        row.end = at;
        row.outcome = e.type === "SUBAGENT_ERROR" ? `failed: ${e.message}` : e.outcome?.type ?? "finished";
        break;
      }
      case "CUSTOM":
        if (e.name === "agent_tower.usage" && step) step.usage = e.value;
        else if (e.name === "agent_tower.cost") run.cost = e.value?.total ?? null;
        else if (e.name === "agent_tower.takeover") run.takeovers.push({ at, value: e.value });
        break;
      case "RUN_FINISHED":
        run.ended = e.outcome?.type ?? "success";
        run.usage = e.usage ?? [];
        if (e.outcome?.type === "interrupt") {
          run.interrupts = e.outcome.interrupts ?? [];
          for (const interrupt of run.interrupts) {
            const row = calls.get(interrupt.toolCallId);
            if (row) row.waits = interrupt;
          }
        }
        break;
      case "RUN_ERROR":
        run.ended = "error";
        run.error = `${e.code ?? "error"}: ${e.message}`;
        run.usage = e.usage ?? [];
        break;
    }
  });
  return run;
}

/** What an answer to an interrupt decided, in words. */
function decision(entry) {
  if (entry.status === "cancelled") return "dismissed";
  const payload = entry.payload ?? {};
  if (payload.approved === false) return payload.feedback ? `rejected (“${payload.feedback}”)` : "rejected";
  if (payload.editedArgs !== undefined) return "approved with edits";
  if (payload.approved === true) return payload.always ? "always approved" : "approved";
  return "answered";
}

/** `ms` as a person reads a duration. */
function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** A cost `{amount, currency}` (or a sum of them), as money. */
function money(cost) {
  if (!cost || typeof cost.amount !== "number") return "";
  return `${cost.amount.toPrecision(2)} ${cost.currency ?? ""}`.trim();
}

function tokens(usage) {
  const sum = (key) => usage.reduce((total, u) => total + (u?.[key] ?? 0), 0);
  const [input, output] = [sum("inputTokens"), sum("outputTokens")];
  return input || output ? `${input} in / ${output} out tokens` : "";
}

/** An argument or a result as a tooltip shows it: text, at most `SHOWN_CHARS` of it. */
function clip(text) {
  return short(typeof text === "string" ? text : JSON.stringify(text), SHOWN_CHARS);
}

/** At most `chars` of `text`. */
function short(text, chars) {
  return text.length > chars ? `${text.slice(0, chars - 1)}…` : text;
}

// ---------------------------------------------------------------------------------------------
// Drawing

function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** One run: a line of what it was (HTML), then its rows against its time (SVG). */
function drawRun(number, record, run, interruptsBefore) {
  const figure = el("figure", `run ${run.ended ?? "running"}`);
  figure.dataset.runId = record.runId;
  const caption = el("figcaption");
  const span = (run.end ?? 0) - (run.start ?? 0);
  const started = run.timed && run.start !== undefined ? new Date(run.start).toLocaleTimeString() : "";
  const facts = [
    `Run ${number}`,
    started,
    run.ended ? `${run.ended === "success" ? "finished" : run.ended}${run.timed ? ` in ${duration(span)}` : ""}` : "running",
    tokens(run.usage),
    money(run.cost),
  ].filter(Boolean);
  caption.append(el("strong", "", facts.shift()), ` · ${facts.join(" · ")}`);
  caption.title = record.runId;
  figure.append(caption);
  for (const entry of run.answers) {
    const asked = interruptsBefore.get(entry.interruptId);
    const what = asked?.metadata?.toolName ?? asked?.toolCallId ?? entry.interruptId;
    const by = entry.metadata?.answeredBy;
    figure.append(el("div", "answer", `answers ${what}: ${decision(entry)}${by ? ` by ${by}` : ""}`));
  }
  if (run.error) figure.append(el("div", "run-error", run.error));

  const width = 760;
  const label = 200;
  const row = 22;
  const height = 24 + row * run.rows.length + 6;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img" });
  chart.append(svg("title", {}, `the timeline of run ${number}`));
  const scale = span > 0 ? (width - label - 110) / span : 0;
  const x = (at) => label + ((at ?? run.end ?? 0) - (run.start ?? 0)) * scale;
  // The axis: the start, the middle and the end of the run.
  for (const part of [0, 0.5, 1]) {
    const at = (run.start ?? 0) + span * part;
    chart.append(
      svg("line", { class: "axis", x1: x(at), x2: x(at), y1: 14, y2: height }),
      svg("text", { class: "tick", x: x(at), y: 10, "text-anchor": part === 0 ? "start" : "middle" },
        run.timed ? duration(at - (run.start ?? 0)) : `event ${Math.round(at)}`),
    );
  }
  run.rows.forEach((r, i) => {
    const y = 24 + i * row;
    const group = svg("g", { class: `row ${r.kind}`, "data-kind": r.kind });
    if (r.id) group.dataset.id = r.id;
    group.append(svg("text", { class: "label", x: 4 + r.depth * 14, y: y + 14 }, rowLabel(r)));
    const from = x(r.start);
    const to = Math.max(x(r.end ?? run.end), from + 2);
    if (r.kind === "tool" && r.argsEnd !== undefined) {
      // The arguments streaming (a line), then the tool running (a bar).
      group.append(svg("line", { class: "args", x1: from, x2: x(r.argsEnd), y1: y + 10, y2: y + 10 }));
      group.append(svg("rect", { class: "bar", x: x(r.argsEnd), y: y + 4, width: Math.max(to - x(r.argsEnd), 2), height: 12, rx: 2 }));
    } else {
      group.append(svg("rect", { class: "bar", x: from, y: y + 4, width: to - from, height: 12, rx: 2 }));
    }
    if (r.kind === "step" && r.first !== undefined && r.first > r.start) {
      // Where the first output came.
      group.append(svg("line", { class: "first", x1: x(r.first), x2: x(r.first), y1: y + 2, y2: y + 18 }));
    }
    if (r.waits) {
      const at = x(run.end);
      group.append(svg("path", { class: "waits", d: `M${at} ${y + 3} l7 7 l-7 7 l-7 -7 z` }));
    }
    group.append(svg("text", { class: "detail", x: Math.min(to + 6, width - 104), y: y + 14 }, rowDetail(r, run)));
    group.append(svg("title", {}, rowTooltip(r, run)));
    chart.append(group);
  });
  for (const takeover of run.takeovers) {
    chart.append(
      svg("line", { class: "takeover", x1: x(takeover.at), x2: x(takeover.at), y1: 14, y2: height }),
      svg("text", { class: "tick takeover", x: x(takeover.at) + 3, y: height - 4 }, "taken over"),
    );
  }
  figure.append(chart);
  return figure;
}

function rowLabel(r) {
  const room = 26 - 2 * r.depth;
  if (r.kind === "step") return short(r.name ?? "step", room);
  if (r.kind === "subagent") return `⤷ ${short(r.name, room - 2)}`;
  return `${short(r.name, room - 2)}()`;
}

function rowDetail(r, run) {
  const time = (from, to) => (run.timed && from !== undefined && to !== undefined ? duration(to - from) : "");
  if (r.kind === "step") {
    return [time(r.start, r.end), r.usage ? tokens([r.usage]) : "", money(r.usage?.cost)].filter(Boolean).join(" · ");
  }
  if (r.kind === "subagent") return [time(r.start, r.end), r.outcome ?? "running"].filter(Boolean).join(" · ");
  if (r.waits) return "waits for a person";
  return r.end === undefined ? "no result" : time(r.argsEnd ?? r.start, r.end);
}

function rowTooltip(r, run) {
  const lines = [rowLabel(r), rowDetail(r, run)];
  if (r.kind === "step" && r.first !== undefined && run.timed) lines.push(`first output after ${duration(r.first - r.start)}`);
  if (r.kind === "step" && r.usage?.model) lines.push(`model ${r.usage.model}`);
  if (r.kind === "tool") {
    lines.push(`arguments: ${clip(r.args || "{}")}`);
    if (r.result !== null) lines.push(`result: ${clip(r.result)}`);
    if (r.waits) lines.push(r.waits.message ?? "asked about");
  }
  return lines.filter(Boolean).join("\n");
}

/** Draws the runs loaded (at most once a frame). */
function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    drawRuns();
  });
}

function drawRuns() {
  const asked = new Map();
  const names = new Map();
  const figures = drawn.runs.map((record, i) => {
    const run = timeline(record.events, names);
    const figure = drawRun(drawn.first + i + 1, record, run, asked);
    for (const interrupt of run.interrupts) asked.set(interrupt.id, interrupt);
    return figure;
  });
  const shown = document.getElementById("runs");
  if (!figures.length) shown.replaceChildren(el("p", "empty", "No run in this thread yet."));
  else shown.replaceChildren(...figures.reverse()); // the latest first
}

// ---------------------------------------------------------------------------------------------
// Loading

/** Whether the runs are on screen. */
function consoleShown() {
  return document.querySelector("main").classList.contains("show-runs");
}

/** Loads (again) the runs of the open thread and draws them; a run in progress goes on being
 * drawn as its events arrive. */
async function loadRuns() {
  drawn.controller?.abort();
  const controller = new AbortController();
  drawn = { threadId: chat.threadId, runs: [], first: 0, controller };
  const signal = controller.signal;
  try {
    const response = await fetch(`/threads/${encodeURIComponent(drawn.threadId)}`, {
      headers: headers({ Accept: "application/json" }),
      signal,
    });
    if (response.status === 404) return drawRuns();
    if (!response.ok) return showError(await refusal(response));
    const thread = await response.json();
    drawn.first = Math.max(thread.runs.length - RUNS_DRAWN, 0);
    drawn.runs = thread.runs.slice(drawn.first).map((run) => ({ runId: run.runId, status: run.status, events: [] }));
    drawRuns();
    await Promise.all(drawn.runs.map((record) => loadRun(record, signal)));
  } catch (error) {
    if (!signal.aborted) showError(`the runs could not be read: ${error.message}`);
  }
}

/** Reads one run's log into `record`, to its end. */
async function loadRun(record, signal) {
  const response = await fetch(`/runs/${encodeURIComponent(record.runId)}/events`, {
    headers: headers({ Accept: "text/event-stream" }),
    signal,
  });
  if (response.status === 204 || !response.ok) return;
  await readFrames(response.body, (_, event) => {
    record.events.push(event);
    scheduleDraw();
  });
}

/** What the page saw of its thread: a run that ended may have stopped to ask (the inbox is
 * read again); a run not drawn yet is loaded with the others. */
function consoleSaw(event) {
  if (["RUN_FINISHED", "RUN_ERROR"].includes(event.type)) {
    loadInbox();
    loadOperations();
  }
  if (!consoleShown() || event.type !== "RUN_STARTED") return;
  if (drawn.threadId !== chat.threadId || !drawn.runs.some((run) => run.runId === event.runId)) loadRuns();
}

function showRuns(on) {
  document.querySelector("main").classList.toggle("show-runs", on);
  $("view-chat").setAttribute("aria-selected", String(!on));
  $("view-runs").setAttribute("aria-selected", String(on));
  if (on) loadRuns();
  else {
    drawn.controller?.abort();
    drawn = { threadId: null, runs: [], first: 0, controller: null };
  }
}

// ---------------------------------------------------------------------------------------------
// Waiting for a person

/** Lists the pending interrupts of every thread the caller may see. */
async function loadInbox() {
  const inbox = $("inbox");
  let response;
  try {
    response = await fetch("/interrupts?status=pending", { headers: headers({ Accept: "application/json" }) });
  } catch {
    return;
  }
  if (!response.ok) {
    inbox.replaceChildren(el("li", "empty", response.status === 403 ? "an operator token shows them" : await refusal(response)));
    return;
  }
  const pending = (await response.json()).interrupts.filter((interrupt) => !interrupt.expired);
  if (!pending.length) {
    inbox.replaceChildren(el("li", "empty", "nothing waits"));
    return;
  }
  inbox.replaceChildren(...pending.map(inboxItem));
}

function inboxItem(interrupt) {
  const item = el("li");
  item.dataset.interruptId = interrupt.id;
  item.dataset.threadId = interrupt.threadId;
  const thread = threads.find((t) => t.threadId === interrupt.threadId);
  item.append(el("strong", "", interrupt.toolName), el("code", "", clip(JSON.stringify(interrupt.arguments))));
  const where = el("button", "thread", `in ${short(thread?.title ?? interrupt.threadId, 40)}`);
  where.type = "button";
  where.title = `open thread ${interrupt.threadId}`;
  where.addEventListener("click", () => openThread(interrupt.threadId));
  item.append(where, el("span", "age", `asked ${duration(interrupt.ageSeconds * 1000)} ago`));
  const actions = el("div", "actions");
  for (const [label, payload] of [["Approve", { approved: true }], ["Reject", { approved: false }]]) {
    const button = el("button", "", label);
    button.type = "button";
    button.addEventListener("click", () => resolveInterrupt(item, interrupt, payload));
    actions.append(button);
  }
  item.append(actions);
  return item;
}

async function resolveInterrupt(item, interrupt, payload) {
  for (const button of item.querySelectorAll("button")) button.disabled = true;
  const response = await fetch(`/interrupts/${encodeURIComponent(interrupt.id)}/resolve`, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify({ status: "resolved", payload }),
  }).catch((error) => ({ ok: false, error }));
  if (!response.ok) showError(response.error ? `the answer was not sent: ${response.error.message}` : await refusal(response));
  loadInbox();
}

// ---------------------------------------------------------------------------------------------
// Schedules and webhooks

/** Reads an operator's list at `route` into the list `id`, each item made by `item`; says why
 * when the caller may not, or the server keeps none. */
async function loadList(id, route, key, item, none) {
  const list = $(id);
  let response;
  try {
    response = await fetch(route, { headers: headers({ Accept: "application/json" }) });
  } catch {
    return;
  }
  if (!response.ok) {
    const why = response.status === 403 ? "an operator token shows them" : response.status === 404 ? none : await refusal(response);
    list.replaceChildren(el("li", "empty", why));
    return;
  }
  const entries = (await response.json())[key];
  list.replaceChildren(...(entries.length ? entries.map(item) : [el("li", "empty", none)]));
}

/** When an RFC 3339 time falls, from now: `in 3s`, `2m ago`. */
function fromNow(time) {
  const ms = Date.parse(time) - Date.now();
  return ms >= 0 ? `in ${duration(ms)}` : `${duration(-ms)} ago`;
}

function scheduleItem(schedule) {
  const item = el("li");
  item.dataset.schedule = schedule.name;
  const when = schedule.spec.cron ? `${schedule.spec.cron}${schedule.spec.timeZone ? ` (${schedule.spec.timeZone})` : ""}` : `at ${schedule.spec.at}`;
  item.append(el("strong", "", schedule.name), el("code", "", when));
  const next = !schedule.nextAt ? "no occurrence left" : Date.parse(schedule.nextAt) <= Date.now() ? "next due now" : `next ${fromNow(schedule.nextAt)}`;
  item.append(el("span", "next", next));
  if (schedule.lastAt) {
    const last = el("span", "last", `last ${fromNow(schedule.lastAt)}${schedule.lastRunId ? `: ${schedule.lastRunId}` : " (skipped)"}`);
    if (schedule.lastRunId) last.dataset.runId = schedule.lastRunId;
    item.append(last);
  }
  return item;
}

function webhookItem(webhook) {
  const item = el("li", webhook.status);
  item.dataset.webhookId = webhook.id;
  item.dataset.runId = webhook.runId;
  const attempts = `${webhook.attempts} attempt${webhook.attempts === 1 ? "" : "s"}`;
  item.append(el("strong", "", `${webhook.type} ${webhook.status}`), el("span", "", `${webhook.runId} · ${attempts} · ${fromNow(webhook.updatedAt)}`));
  if (webhook.lastError && webhook.status !== "delivered") item.append(el("span", "error", webhook.lastError));
  return item;
}

function loadOperations() {
  loadList("schedules", "/schedules", "schedules", scheduleItem, "no schedule");
  loadList("webhooks", "/webhooks?limit=20", "webhooks", webhookItem, "no webhook");
}

/** Wires the console; called last by app.js. */
function startConsole() {
  $("view-chat").addEventListener("click", () => showRuns(false));
  $("view-runs").addEventListener("click", () => showRuns(true));
  $("refresh-inbox").addEventListener("click", () => {
    loadInbox();
    loadOperations();
  });
  loadInbox();
  loadOperations();
}
