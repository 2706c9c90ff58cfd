// The development page of agent-tower: an AG-UI client in one file, with no dependencies.
// It keeps the conversation in localStorage (the protocol is stateless: every run carries the
// messages), restores it from the server on load (`GET /threads/{id}/events`; `?thread=ID` opens
// another page's thread), and keeps the token in sessionStorage. A run in progress is re-joined
// after a reload or a dropped connection with `Last-Event-ID: {runId}:{seq}`, and Stop cancels
// it on the server (`POST /runs/{id}/cancel`), whose stream then ends with the run. While it
// runs nothing itself, it follows the thread (`?follow=true`): a run another tab or device starts
// shows here as it streams. Beside it, the caller's threads, followed live (`GET /threads`):
// opened, named, archived and deleted from here. What the agent did, drawn, and what waits for a
// person in every thread, are the console's (console.js).
"use strict";

const RUN_PATH = document.querySelector('meta[name="agent-tower-run-path"]').content;
const STORE = "agent-tower";
const MAX_LOGGED = 500;
const $ = (id) => document.getElementById(id);

/** Everything that survives a reload. */
let chat = load() ?? fresh();
/** The request being streamed: its AbortController, or null. */
let streaming = null;
/** Whether the page left the run (a new thread): its events are no longer followed. */
let stopped = false;
/** The thread followed while the page runs nothing itself: its AbortController, or null. */
let following = null;
/** Decisions taken on the pending interrupts, by interrupt id. */
const answers = new Map();

function fresh() {
  return { threadId: uuid(), messages: [], state: {}, interrupts: [], live: null };
}

function load() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORE));
    return saved && typeof saved.threadId === "string" ? saved : null;
  } catch {
    return null;
  }
}

function save() {
  localStorage.setItem(STORE, JSON.stringify(chat));
}

function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function headers(extra) {
  const token = sessionStorage.getItem(`${STORE}-token`);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

// ---------------------------------------------------------------------------------------------
// Runs

/** Starts a run on the thread with the conversation so far (and `resume`, when answering). */
async function startRun(resume) {
  unfollow();
  const runId = uuid();
  const input = {
    threadId: chat.threadId,
    runId,
    // The whole conversation, its reasoning too: the thread keeps what the run is sent.
    messages: chat.messages,
    tools: [],
    context: [],
    state: chat.state,
    forwardedProps: {},
    protocolVersion: "1.0",
  };
  if (resume) input.resume = resume;
  chat.live = { runId, seq: 0 };
  $("status").dataset.runId = runId;
  chat.interrupts = [];
  answers.clear();
  save();
  stopped = false;
  await stream(runId, () =>
    fetch(RUN_PATH, {
      method: "POST",
      // This page re-joins its run after a reload: the server keeps it for the re-join grace.
      headers: headers({
        "Content-Type": "application/json",
        Accept: "text/event-stream",
        Prefer: "rejoin",
      }),
      body: JSON.stringify(input),
      signal: streaming.signal,
    }),
  );
  if (chat.live && !stopped) await rejoin(); // the connection dropped before the run ended
}

/** Follows the live run from the last event seen, until it ends (a few tries on failure). */
async function rejoin() {
  for (let attempt = 0; chat.live && attempt < 5; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
    const { runId, seq } = chat.live;
    $("status").dataset.runId = runId;
    await stream(runId, () =>
      fetch(`/runs/${encodeURIComponent(runId)}/events`, {
        headers: headers({ Accept: "text/event-stream", "Last-Event-ID": `${runId}:${seq}` }),
        signal: streaming.signal,
      }),
    );
    if (stopped) return;
  }
  if (chat.live) {
    chat.live = null;
    fail("the run's events could not be re-joined");
  }
}

/** Restores the thread from the server (`GET /threads/{id}/events`): its conversation, state
 * and pending interrupts, then its run in flight, followed to its end. A thread the server does
 * not have stays as this page kept it. */
async function connect() {
  await stream(
    null,
    () =>
      fetch(`/threads/${encodeURIComponent(chat.threadId)}/events`, {
        headers: headers({ Accept: "text/event-stream" }),
        signal: streaming.signal,
      }),
    { missing: "keep" },
  );
}

/** Reads one response's events (of `runId`; `null`: whichever run they name); leaves
 * `chat.live` set if the stream ended before the run. */
async function stream(runId, request, { missing = "fail" } = {}) {
  streaming = new AbortController();
  setStatus(chat.live?.seq ? "re-joining" : "running");
  showError(null);
  try {
    const response = await request();
    if (response.status === 204) {
      chat.live = null; // the run ended and every event was seen
    } else if (response.status === 404 && missing === "keep") {
      // Nothing on the server for this thread: the page's own copy stands.
    } else if (!response.ok) {
      chat.live = null;
      fail(await refusal(response));
      if (response.status === 401) $("token").focus();
    } else {
      await readEvents(response.body, runId);
    }
  } catch (error) {
    if (!stopped) showError(`the connection failed: ${error.message}`);
  } finally {
    streaming = null;
    save();
    render();
  }
  if (stopped) return;
  if (!chat.live && !["error", "cancelled"].includes($("status").textContent)) {
    setStatus(chat.interrupts.length ? "interrupted" : "idle");
  }
  if (!chat.live) follow();
}

/** Follows the thread's later runs as they start, whoever starts them, until this page starts
 * one or leaves the thread. The stream restores the thread first, as a connect does; its events
 * never become this page's live run. Ends quietly: the next run of this page follows again. */
async function follow() {
  if (following || streaming) return;
  const controller = new AbortController();
  following = controller;
  try {
    const response = await fetch(`/threads/${encodeURIComponent(chat.threadId)}/events?follow=true`, {
      headers: headers({ Accept: "text/event-stream" }),
      signal: controller.signal,
    });
    if (response.ok) await readEvents(response.body, null, { live: false });
  } catch {
    // Aborted (this page runs), or the connection dropped.
  } finally {
    if (following === controller) following = null;
    // A followed run whose end this page did not see (the connection dropped) stops showing.
    if (!streaming && $("status").textContent === "running") setStatus("idle");
  }
}

function unfollow() {
  following?.abort();
  following = null;
}

/** Server-sent events: `id: …` and `data: {json}`, blocks ended by a blank line; `onEvent(id,
 * event)` for each (keep-alive comments skipped), until the body ends. */
async function readFrames(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      let id = null;
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(id, JSON.parse(data.join("\n")));
    }
  }
}

/** A run's events (`id: {runId}:{seq}`). With `live`, the run they name is this page's to
 * re-join; without, they are a followed thread's: the thread as it is first (its content taken,
 * the page's status left as it is), then the runs others start, shown running until they end. */
async function readEvents(body, runId, { live = true } = {}) {
  let restoring = !live;
  await readFrames(body, (id, event) => {
    if (id) {
      // `{runId}:{seq}`: where to re-join (a connected thread's run is learnt from its ids).
      const run = id.slice(0, id.lastIndexOf(":"));
      const seq = Number(id.slice(id.lastIndexOf(":") + 1));
      if (live && (runId ?? run) === run) chat.live = { runId: run, seq };
    }
    // A run another screen started: shown running here; its failure is that screen's to show
    // (a refused stale copy, say), not this page's.
    const followed = !live && !restoring;
    if (followed && event.type === "RUN_STARTED") setStatus("running");
    const failed = followed && event.type === "RUN_ERROR";
    apply(event, { quiet: restoring || failed });
    consoleSaw(event);
    if (failed) setStatus("idle");
    if (["RUN_FINISHED", "RUN_ERROR"].includes(event.type)) restoring = false;
    logEvent(event, id);
    save();
    scheduleRender();
  });
}

/** Cancels the live run on the server; its stream goes on to the run's last events. */
async function stop() {
  const runId = chat.live?.runId;
  if (!runId) return;
  setStatus("stopping");
  try {
    const response = await fetch(`/runs/${encodeURIComponent(runId)}/cancel`, {
      method: "POST",
      headers: headers({}),
    });
    if (!response.ok) fail(await refusal(response));
  } catch (error) {
    showError(`the run could not be stopped: ${error.message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Events into the conversation

function message(id, role) {
  let found = chat.messages.find((m) => m.id === id);
  if (!found) {
    found = { id, role, content: "" };
    chat.messages.push(found);
  }
  return found;
}

function toolCall(id) {
  for (const m of chat.messages) {
    const call = m.toolCalls?.find((c) => c.id === id);
    if (call) return call;
  }
  return null;
}

/** Takes `event` into the conversation; `quiet`: without changing the page's status. */
function apply(event, { quiet = false } = {}) {
  switch (event.type) {
    case "RUN_STARTED": {
      // What the run answers (a turn another tab sent): the messages the page does not hold.
      for (const m of event.input?.messages ?? []) {
        if (!chat.messages.some((held) => held.id === m.id)) chat.messages.push(m);
      }
      // Interrupts it answers (answered elsewhere: another tab, the console) wait no more.
      const answered = new Set((event.input?.resume ?? []).map((entry) => entry.interruptId));
      chat.interrupts = chat.interrupts.filter((interrupt) => !answered.has(interrupt.id));
      break;
    }
    case "TEXT_MESSAGE_START":
    case "TEXT_MESSAGE_CONTENT":
    case "TEXT_MESSAGE_CHUNK":
      message(event.messageId, "assistant").content += event.delta ?? "";
      break;
    case "REASONING_MESSAGE_START":
    case "REASONING_MESSAGE_CONTENT":
    case "REASONING_MESSAGE_CHUNK":
      message(event.messageId, "reasoning").content += event.delta ?? "";
      break;
    case "TOOL_CALL_START":
    case "TOOL_CALL_CHUNK": {
      let call = toolCall(event.toolCallId);
      if (!call) {
        const parent = message(event.parentMessageId ?? event.toolCallId, "assistant");
        call = { id: event.toolCallId, type: "function", function: { name: event.toolCallName, arguments: "" } };
        (parent.toolCalls ??= []).push(call);
      }
      call.function.arguments += event.delta ?? "";
      break;
    }
    case "TOOL_CALL_ARGS": {
      const call = toolCall(event.toolCallId);
      if (call) call.function.arguments += event.delta;
      break;
    }
    case "TOOL_CALL_RESULT":
      chat.messages.push({
        id: event.messageId,
        role: "tool",
        toolCallId: event.toolCallId,
        content: event.content,
      });
      break;
    case "MESSAGES_SNAPSHOT": {
      // A conversation with its reasoning is the whole of it.
      if (event.messages.some((m) => m.role === "reasoning")) {
        chat.messages = event.messages;
        break;
      }
      // Without any (a client that did not send it back): the page keeps what it saw, before
      // the message it preceded, once.
      const known = new Set(event.messages.map((m) => m.id));
      const before = new Map();
      let reasoning = [];
      for (const m of chat.messages) {
        if (m.role === "reasoning" && !known.has(m.id)) reasoning.push(m);
        else if (reasoning.length) {
          before.set(m.id, reasoning);
          reasoning = [];
        }
      }
      chat.messages = event.messages.flatMap((m) => [...(before.get(m.id) ?? []), m]).concat(reasoning);
      break;
    }
    case "STATE_SNAPSHOT":
      chat.state = event.snapshot ?? {};
      break;
    case "STATE_DELTA":
      try {
        chat.state = patch(chat.state, event.delta);
      } catch (error) {
        fail(`a STATE_DELTA did not apply: ${error.message}`);
      }
      break;
    case "RUN_FINISHED":
      chat.live = null;
      if (event.outcome?.type === "interrupt") chat.interrupts = event.outcome.interrupts ?? [];
      if (quiet) break;
      if (event.outcome?.type === "interrupt") {
        setStatus("interrupted");
      } else if (event.outcome?.type === "cancelled") {
        setStatus("cancelled");
      } else {
        setStatus("idle");
      }
      break;
    case "RUN_ERROR":
      chat.live = null;
      if (!quiet) fail(`${event.code ?? "error"}: ${event.message}`);
      break;
  }
}

/** RFC 6902 on a copy of `doc`; throws when an operation fails. */
function patch(doc, operations) {
  let root = structuredClone(doc);
  // A segment that names what every object inherits (`__proto__`…) would reach past the document:
  // refused, as the server refuses it.
  const unsafe = new Set(["__proto__", "constructor", "prototype"]);
  const parse = (pointer) => {
    if (pointer === "") return [];
    const tokens = pointer.slice(1).split("/").map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
    if (tokens.some((t) => unsafe.has(t))) throw new Error(`\`${pointer}\` names no member of the state`);
    return tokens;
  };
  const has = (node, key) => node !== null && typeof node === "object" && Object.hasOwn(node, key);
  const parentOf = (path) => {
    const tokens = parse(path);
    const key = tokens.pop();
    let node = root;
    for (const t of tokens) {
      if (!has(node, t)) throw new Error(`no \`${path}\``);
      node = node[t];
    }
    return [node, key];
  };
  const get = (path) => {
    if (path === "") return root;
    const [node, key] = parentOf(path);
    if (!has(node, key)) throw new Error(`no \`${path}\``);
    return node[key];
  };
  const add = (path, value) => {
    if (path === "") return void (root = value);
    const [node, key] = parentOf(path);
    if (Array.isArray(node)) node.splice(key === "-" ? node.length : Number(key), 0, value);
    else node[key] = value;
  };
  const remove = (path) => {
    const value = get(path);
    const [node, key] = parentOf(path);
    if (Array.isArray(node)) node.splice(Number(key), 1);
    else delete node[key];
    return value;
  };
  for (const op of operations) {
    switch (op.op) {
      case "add": add(op.path, structuredClone(op.value)); break;
      case "remove": remove(op.path); break;
      case "replace": remove(op.path); add(op.path, structuredClone(op.value)); break;
      case "move": add(op.path, remove(op.from)); break;
      case "copy": add(op.path, structuredClone(get(op.from))); break;
      case "test":
        if (JSON.stringify(get(op.path)) !== JSON.stringify(op.value)) throw new Error(`test failed at \`${op.path}\``);
        break;
      default: throw new Error(`unknown operation \`${op.op}\``);
    }
  }
  return root;
}

// ---------------------------------------------------------------------------------------------
// Interrupts

function answer(interrupt, entry) {
  answers.set(interrupt.id, { interruptId: interrupt.id, ...entry });
  render();
  if (chat.interrupts.every((i) => answers.has(i.id))) {
    startRun(chat.interrupts.map((i) => answers.get(i.id)));
  }
}

/** The cards of the pending interrupts. A card already shown is kept as it is, with what the
 * user typed in it (events arriving meanwhile render the page again); its buttons are disabled
 * once it is answered. */
function interruptCards() {
  const shown = new Map([...$("interrupts").children].map((card) => [card.dataset.interruptId, card]));
  return chat.interrupts.map((interrupt) => {
    const card = shown.get(interrupt.id) ?? interruptCard(interrupt);
    for (const button of card.querySelectorAll(".actions button")) button.disabled = answers.has(interrupt.id);
    return card;
  });
}

function interruptCard(interrupt) {
  const card = el("div", "interrupt");
  card.dataset.interruptId = interrupt.id;
  const meta = interrupt.metadata ?? {};
  card.append(el("strong", "", interrupt.message ?? `Interrupted: ${interrupt.reason}`));
  if (interrupt.expiresAt) card.append(el("div", "expires", `answer before ${new Date(interrupt.expiresAt).toLocaleString()}`));
  const args = el("textarea", "arguments");
  args.rows = 3;
  args.spellcheck = false;
  args.value = JSON.stringify(meta.arguments ?? {}, null, 2);
  args.setAttribute("aria-label", "arguments");
  const feedback = el("input", "feedback");
  feedback.placeholder = "why not (sent to the model when rejecting)";
  feedback.setAttribute("aria-label", "feedback");
  const actions = el("div", "actions");
  const button = (label, decide) => {
    const b = el("button", "", label);
    b.type = "button";
    b.addEventListener("click", decide);
    actions.append(b);
  };
  // "Always": the server decides the tool's later calls in this thread the same way.
  const always = interrupt.responseSchema?.properties?.always !== undefined;
  const rejection = (more) => {
    const payload = { approved: false, ...more };
    if (feedback.value.trim()) payload.feedback = feedback.value.trim();
    answer(interrupt, { status: "resolved", payload });
  };
  button("Approve", () => answer(interrupt, { status: "resolved", payload: { approved: true } }));
  if (always) {
    button("Always approve", () =>
      answer(interrupt, { status: "resolved", payload: { approved: true, always: true } }));
  }
  button("Approve edited", () => {
    let edited;
    try {
      edited = JSON.parse(args.value);
    } catch (error) {
      return fail(`the arguments are not JSON: ${error.message}`);
    }
    answer(interrupt, { status: "resolved", payload: { approved: true, editedArgs: edited } });
  });
  button("Reject", () => rejection({}));
  if (always) button("Always reject", () => rejection({ always: true }));
  button("Dismiss", () => answer(interrupt, { status: "cancelled" }));
  card.append(args, feedback, actions);
  return card;
}

// ---------------------------------------------------------------------------------------------
// Rendering

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => {
    renderPending = false;
    render();
  });
}

function render() {
  $("thread").textContent = chat.threadId;
  const results = new Map(chat.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m]));
  const items = chat.messages
    .filter((m) => m.role !== "tool")
    .map((m) => {
      const text =
        typeof m.content === "string" ? m.content : m.content == null ? "" : JSON.stringify(m.content);
      const item = el("li", `message ${m.role}`);
      item.append(m.role === "assistant" ? markdown(text) : text);
      item.dataset.messageId = m.id;
      for (const call of m.toolCalls ?? []) {
        const card = el("div", "tool-call");
        card.dataset.toolCallId = call.id;
        card.append(el("span", "name", call.function.name));
        card.append(el("pre", "args", call.function.arguments));
        const result = results.get(call.id);
        if (!result) card.classList.add("pending");
        card.append(el("pre", "result", result ? result.content : "…"));
        item.append(card);
      }
      return item;
    });
  const transcript = $("transcript");
  const atBottom = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
  transcript.replaceChildren(...items);
  if (atBottom) transcript.scrollTop = transcript.scrollHeight;
  const cards = interruptCards();
  const interrupts = $("interrupts");
  if (cards.length !== interrupts.children.length || cards.some((card, i) => card !== interrupts.children[i])) {
    interrupts.replaceChildren(...cards);
  }
  $("state").textContent = JSON.stringify(chat.state, null, 2);
  const busy = Boolean(streaming) || Boolean(chat.live);
  $("send").disabled = busy || chat.interrupts.length > 0;
  $("stop").disabled = !busy;
}

/** One line per event (its type and id), the whole event when opened; the filter applies. */
function logEvent(event, id) {
  const item = el("li");
  item.dataset.type = event.type;
  const line = el("details");
  const summary = el("summary");
  summary.append(el("span", "type", event.type), ` ${id ?? ""}`);
  line.append(summary, el("pre", "", JSON.stringify(event, null, 2)));
  item.append(line);
  item.hidden = !shown(event.type);
  const events = $("events");
  events.prepend(item);
  while (events.childElementCount > MAX_LOGGED) events.lastElementChild.remove();
}

/** Whether the event filter lets events of `type` show. */
function shown(type) {
  const filter = $("event-filter").value.trim().toUpperCase();
  return !filter || type.includes(filter);
}

// ---------------------------------------------------------------------------------------------
// Markdown, as elements (never HTML from the model): paragraphs, headings, lists, fenced code,
// `code`, **strong**, *emphasis* and http(s) links.

function markdown(text) {
  const root = el("div", "text");
  const lines = text.split("\n");
  let paragraph = [];
  let list = null;
  const flush = () => {
    if (paragraph.length) root.append(inline(el("p"), paragraph.join("\n")));
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      list = null;
      const code = [];
      while (++i < lines.length && !lines[i].startsWith("```")) code.push(lines[i]);
      const pre = el("pre");
      pre.append(el("code", "", code.join("\n")));
      root.append(pre);
      continue;
    }
    const heading = line.match(/^#{1,6}\s+(.*)$/);
    const item = line.match(/^\s*(?:[-*]|(\d+)\.)\s+(.*)$/);
    if (heading) {
      flush();
      list = null;
      root.append(inline(el("h4"), heading[1]));
    } else if (item) {
      flush();
      const tag = item[1] === undefined ? "ul" : "ol";
      if (list?.tagName.toLowerCase() !== tag) root.append((list = el(tag)));
      list.append(inline(el("li"), item[2]));
    } else if (!line.trim()) {
      flush();
      list = null;
    } else {
      list = null;
      paragraph.push(line);
    }
  }
  flush();
  return root;
}

/** `text`'s inline markup into `node`. */
function inline(node, text) {
  const pattern = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\[([^\]]+)\]\((https?:\/\/[^)\s]+)\)/g;
  let at = 0;
  for (const match of text.matchAll(pattern)) {
    node.append(text.slice(at, match.index));
    const [, code, strong, em, label, href] = match;
    if (code !== undefined) node.append(el("code", "", code));
    else if (strong !== undefined) node.append(el("strong", "", strong));
    else if (em !== undefined) node.append(el("em", "", em));
    else {
      const link = el("a", "", label);
      link.href = href;
      link.rel = "noopener noreferrer";
      link.target = "_blank";
      node.append(link);
    }
    at = match.index + match[0].length;
  }
  node.append(text.slice(at));
  return node;
}

function setStatus(text) {
  const status = $("status");
  status.textContent = text;
  status.className = text;
  render();
}

/** What an error answer of the server says: its status, and its `{error: {code, message}}`. */
async function refusal(response) {
  const error = (await response.json().catch(() => ({}))).error ?? {};
  return `${response.status} ${error.code ?? ""}: ${error.message ?? response.statusText}`;
}

function showError(text) {
  $("error").hidden = !text;
  $("error").textContent = text ?? "";
}

function fail(text) {
  showError(text);
  setStatus("error");
}

// ---------------------------------------------------------------------------------------------
// The thread list (`GET /threads`, followed live)

/** The threads listed, newest first. */
let threads = [];
/** The list's live stream: its AbortController, or null. */
let listing = null;

/** Follows the list's changes, then lists (nothing changed between the two is missed); follows
 * again, and lists again, after the server ends the stream (its instance stopped). */
async function followThreads() {
  listing?.abort();
  const controller = new AbortController();
  listing = controller;
  while (listing === controller) {
    try {
      const response = await fetch("/threads", {
        headers: headers({ Accept: "text/event-stream" }),
        signal: controller.signal,
      });
      if (!response.ok) return; // not this server's route, or no token yet
      await listThreads();
      await readFrames(response.body, (_, change) => threadChanged(change));
    } catch {
      if (controller.signal.aborted) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function listThreads() {
  const response = await fetch("/threads?limit=100&archived=all", {
    headers: headers({ Accept: "application/json" }),
  });
  if (response.ok) {
    threads = (await response.json()).threads;
    renderThreads();
  }
}

function threadChanged(change) {
  loadInbox(); // a run of the thread may have stopped to ask, or been answered
  if (change.type === "THREADS_CHANGED") {
    listThreads();
    return;
  }
  const id = change.thread?.threadId ?? change.threadId;
  const at = threads.findIndex((thread) => thread.threadId === id);
  if (change.type === "THREAD_DELETED") {
    if (at >= 0) threads.splice(at, 1);
  } else if (at >= 0 && threads[at].updatedAt === change.thread.updatedAt) {
    threads[at] = change.thread; // named or archived: in its place
  } else {
    if (at >= 0) threads.splice(at, 1);
    threads.unshift(change.thread); // new, or continued: on top
  }
  renderThreads();
}

/** `PATCH` or `DELETE /threads/{id}`. */
async function changeThread(threadId, method, body) {
  const response = await fetch(`/threads/${encodeURIComponent(threadId)}`, {
    method,
    headers: headers(body ? { "Content-Type": "application/json" } : {}),
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!response.ok) showError(await refusal(response));
}

function renderThreads() {
  const archive = $("show-archived").checked;
  const items = threads
    .filter((thread) => thread.archived === archive)
    .map((thread) => {
      const item = el("li", thread.threadId === chat.threadId ? "current" : "");
      item.dataset.threadId = thread.threadId;
      const open = el("button", "open", thread.title ?? thread.threadId);
      open.type = "button";
      open.title = `${thread.threadId}, ${thread.updatedAt}`;
      open.addEventListener("click", () => openThread(thread.threadId));
      const rename = el("button", "rename", "✎");
      rename.type = "button";
      rename.title = "rename";
      rename.addEventListener("click", () => {
        const title = prompt("The thread's name (empty: its first prompt's line)", thread.title ?? "");
        if (title !== null) changeThread(thread.threadId, "PATCH", { title: title.trim() || null });
      });
      const shelve = el("button", "archive", thread.archived ? "⇡" : "⇣");
      shelve.type = "button";
      shelve.title = thread.archived ? "unarchive" : "archive";
      shelve.addEventListener("click", () =>
        changeThread(thread.threadId, "PATCH", { archived: !thread.archived }),
      );
      const remove = el("button", "delete", "✕");
      remove.type = "button";
      remove.title = "delete";
      remove.addEventListener("click", () => {
        if (confirm("Delete this thread and everything of it?")) changeThread(thread.threadId, "DELETE");
      });
      item.append(open, rename, shelve, remove);
      return item;
    });
  $("threads").replaceChildren(...items);
}

/** Leaves the current thread (its run goes on on the server) for `threadId`, restored from the
 * server (`null`: a new thread). */
function openThread(threadId) {
  stopped = true;
  streaming?.abort();
  unfollow();
  chat = threadId ? { ...fresh(), threadId } : fresh();
  answers.clear();
  save();
  showError(null);
  setStatus("idle");
  $("transcript").replaceChildren();
  $("events").replaceChildren();
  render();
  renderThreads();
  if (threadId) {
    stopped = false;
    connect();
  }
  if (consoleShown()) loadRuns();
}

// ---------------------------------------------------------------------------------------------
// Wiring

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("message").value.trim();
  if (!text || $("send").disabled) return;
  $("message").value = "";
  chat.messages.push({ id: uuid(), role: "user", content: text });
  startRun();
});
$("message").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", stop);
$("new-thread").addEventListener("click", () => openThread(null));
$("show-archived").addEventListener("change", renderThreads);
$("token").value = sessionStorage.getItem(`${STORE}-token`) ?? "";
$("token").addEventListener("change", (e) => {
  if (e.target.value) sessionStorage.setItem(`${STORE}-token`, e.target.value);
  else sessionStorage.removeItem(`${STORE}-token`);
  followThreads(); // another principal's list
  loadInbox();
});
$("set-state").addEventListener("click", () => {
  try {
    chat.state = JSON.parse($("state-input").value || "{}");
    save();
    render();
  } catch (error) {
    fail(`the state is not JSON: ${error.message}`);
  }
});
$("clear-events").addEventListener("click", () => $("events").replaceChildren());
$("event-filter").addEventListener("input", () => {
  for (const item of $("events").children) item.hidden = !shown(item.dataset.type);
});

// `?thread=ID` opens that thread (another tab's, another device's): the server restores it.
const asked = new URLSearchParams(location.search).get("thread");
if (asked && asked !== chat.threadId) {
  chat = { ...fresh(), threadId: asked };
  save();
}
render();
setStatus(chat.interrupts.length ? "interrupted" : "idle");
// A run this page was following is re-joined after its last event; else the thread is restored
// from the server (what another page did meanwhile included), unless it is a new one this page
// made and never ran: the server has nothing of it yet.
if (chat.live) rejoin();
else if (asked || chat.messages.length > 0) connect();
followThreads();
startConsole();
