// Drives `agent-tower acp` (the binary given as the first argument, started with the arguments
// after it) with the official TypeScript ACP client (@agentclientprotocol/sdk), over stdio,
// through every scenario an editor meets, the last one across a restart of the agent (SIGKILL,
// then a new process on the same store). Throws (exit code 1) on the first expectation that
// fails; prints one line per scenario.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
// The methods not yet stable in ACP (session/fork, session/set_title, session/archive).
import { methods as unstable } from "@agentclientprotocol/sdk/unstable";
import { editorClient, kind, text } from "./acp-editor.mjs";

const [bin, ...agentArgs] = process.argv.slice(2);
if (!bin) throw new Error("usage: node acp-client.mjs <agent-tower binary> [acp arguments]");

/** One agent process and a client connected to it; `run(ctx)` is the scenario. */
async function withAgent(run) {
  const child = spawn(bin, ["acp", ...agentArgs], { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const { editor, client } = editorClient("agent-tower-e2e");
  // The methods of the agent's messages, as they came over the wire.
  editor.methods = [];
  let partial = "";
  child.stdout.on("data", (chunk) => {
    const lines = (partial + chunk.toString()).split("\n");
    partial = lines.pop();
    for (const line of lines) {
      const method = line.trim() && JSON.parse(line).method;
      if (method) editor.methods.push(method);
    }
  });
  try {
    return await client.connectWith(stream, (ctx) => run(ctx, editor));
  } finally {
    child.kill("SIGKILL");
  }
}

const statusOf = (updates, status) =>
  updates.filter((u) => kind(u) === "tool_call_update" && u.update.status === status);

async function session(ctx) {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: "agent-tower-e2e", version: "0.0.0" },
  });
  assert.equal(init.protocolVersion, 1);
  const created = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
  return { init, created, sessionId: created.sessionId };
}

const prompt = (ctx, sessionId, words) =>
  ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: words }] });

const scenarios = {
  async "initialize, new session, streamed prompt"(ctx, editor) {
    const { init, created, sessionId } = await session(ctx);
    assert.equal(init.agentInfo.name, "agent-tower");
    assert.equal(init.agentCapabilities.loadSession, true);
    assert.equal(created.modes.currentModeId, "ask");
    const answer = await prompt(ctx, sessionId, "hello editor");
    assert.equal(answer.stopReason, "end_turn");
    assert.equal(text(editor.updates), "You said: hello editor");
    assert.ok(editor.updates.some((u) => kind(u) === "session_info_update"));
    // The context window the agent was started with (`--context-window`).
    const usage = editor.updates.find((u) => kind(u) === "usage_update");
    assert.equal(usage.update.size, 32000);
    assert.ok(editor.updates.some((u) => kind(u) === "available_commands_update"));
  },

  async "tool call allowed, then rejected"(ctx, editor) {
    const { sessionId } = await session(ctx);
    let answer = await prompt(ctx, sessionId, 'write_document {"document": "one two three"}');
    assert.equal(answer.stopReason, "end_turn");
    assert.equal(editor.asked.length, 1);
    assert.ok(editor.asked[0].announced, "the tool_call update comes before its permission request");
    assert.deepEqual(
      editor.asked[0].options.map((o) => o.kind),
      ["allow_once", "allow_always", "reject_once", "reject_always"],
    );
    const call = editor.updates.find((u) => kind(u) === "tool_call");
    assert.equal(call.update.kind, "edit");
    assert.equal(call.update.rawInput.document, "one two three");
    assert.equal(statusOf(editor.updates, "completed").length, 1);
    assert.match(text(editor.updates), /saved 3 words/);

    editor.answer = () => ({ outcome: { outcome: "selected", optionId: "reject_once" } });
    editor.updates.length = 0;
    answer = await prompt(ctx, sessionId, 'write_document {"document": "x"}');
    assert.equal(answer.stopReason, "end_turn");
    assert.equal(statusOf(editor.updates, "failed").length, 1);
    assert.equal(statusOf(editor.updates, "in_progress").length, 0);
    assert.match(text(editor.updates), /declined/);
  },

  async "allow_always is remembered on the second call"(ctx, editor) {
    const { sessionId } = await session(ctx);
    editor.answer = () => ({ outcome: { outcome: "selected", optionId: "allow_always" } });
    await prompt(ctx, sessionId, 'write_document {"document": "a"}');
    await prompt(ctx, sessionId, 'write_document {"document": "b"}');
    assert.equal(editor.asked.length, 1, "asked once");
    assert.equal(statusOf(editor.updates, "completed").length, 2);
  },

  async "cancel while streaming"(ctx, editor) {
    const { sessionId } = await session(ctx);
    const answer = prompt(ctx, sessionId, "tell me slowly");
    await editor.waitFor((u) => kind(u) === "agent_message_chunk");
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
    assert.equal((await answer).stopReason, "cancelled");
    const seen = editor.updates.length;
    // A round trip later, nothing more of the turn arrived.
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
    const late = editor.updates.slice(seen).filter((u) => !["current_mode_update", "config_option_update"].includes(kind(u)));
    assert.deepEqual(late, []);
  },

  async "cancel while a permission request is pending"(ctx, editor) {
    const { sessionId } = await session(ctx);
    let pending;
    const asked = new Promise((resolve) => {
      editor.answer = () =>
        new Promise((answer) => {
          pending = answer;
          resolve();
        });
    });
    const answer = prompt(ctx, sessionId, 'write_document {"document": "x"}');
    await asked;
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
    assert.equal((await answer).stopReason, "cancelled");
    // As ACP asks of a client, `cancelled` for the turn's pending requests (here once the turn
    // was answered).
    pending({ outcome: { outcome: "cancelled" } });
    assert.equal(statusOf(editor.updates, "failed").length, 1);
    const seen = editor.updates.length;
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
    const late = editor.updates.slice(seen).filter((u) => !["current_mode_update", "config_option_update"].includes(kind(u)));
    assert.deepEqual(late, []);
    // The request was answered: the agent does not withdraw it as well.
    assert.ok(!editor.methods.includes("$/cancel_request"), editor.methods.join(" "));
  },

  async "session/new sent before initialize is answered"(ctx) {
    const init = ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    const created = ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    assert.equal((await init).protocolVersion, 1);
    assert.ok((await created).sessionId);
  },

  async "set_mode, close, load"(ctx, editor) {
    const { sessionId } = await session(ctx);
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "read-only" });
    await editor.waitFor((u) => kind(u) === "current_mode_update" && u.update.currentModeId === "read-only");
    await prompt(ctx, sessionId, 'write_document {"document": "x"}');
    assert.equal(editor.asked.length, 0, "read-only refuses without asking");
    const live = text(editor.updates);
    await ctx.request(acp.methods.agent.session.close, { sessionId });
    editor.updates.length = 0;
    const loaded = await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: process.cwd(), mcpServers: [] });
    assert.equal(loaded.modes.currentModeId, "read-only");
    assert.equal(kind(editor.updates[0]), "user_message_chunk");
    assert.ok(editor.updates.some((u) => kind(u) === "tool_call"));
    assert.equal(text(editor.updates), live);
    // Everything the load sends comes before its answer: a client that stops reading then has
    // the whole session.
    assert.ok(editor.updates.some((u) => kind(u) === "available_commands_update"), "commands before the answer");
  },

  async "an unsupported protocol version is answered with 1"(ctx) {
    const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: 99, clientCapabilities: {} });
    assert.equal(init.protocolVersion, 1);
  },
};

for (const [name, run] of Object.entries(scenarios)) {
  await withAgent(run);
  console.log(`ok - ${name}`);
}

// A session survives a restart: the first process is killed once the turn is answered.
{
  const { sessionId, live } = await withAgent(async (ctx, editor) => {
    const { sessionId } = await session(ctx);
    await prompt(ctx, sessionId, "hello before the restart");
    return { sessionId, live: text(editor.updates) };
  });
  assert.match(live, /hello before the restart/);
  await withAgent(async (ctx, editor) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: process.cwd(), mcpServers: [] });
    assert.equal(kind(editor.updates[0]), "user_message_chunk");
    assert.equal(text(editor.updates), live);
    assert.ok(editor.updates.some((u) => kind(u) === "available_commands_update"), "commands before the answer");
    const more = await prompt(ctx, sessionId, "and after it");
    assert.equal(more.stopReason, "end_turn", "the loaded session goes on");
  });
  console.log("ok - a session survives a restart of the agent");
}

// An editor's history, from later processes: sessions listed (newest first), one resumed without
// its history sent, one deleted.
{
  const cwd = process.cwd();
  const made = await withAgent(async (ctx) => {
    const { init, sessionId: first } = await session(ctx);
    const caps = init.agentCapabilities.sessionCapabilities;
    assert.ok(caps.list && caps.resume && caps.delete && caps.close, JSON.stringify(caps));
    await prompt(ctx, first, "listed first");
    const second = (await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] })).sessionId;
    await prompt(ctx, second, "listed second");
    return { first, second };
  });
  await withAgent(async (ctx, editor) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const listed = await ctx.request(acp.methods.agent.session.list, { cwd });
    const at = (id) => listed.sessions.findIndex((s) => s.sessionId === id);
    assert.ok(at(made.second) >= 0 && at(made.second) < at(made.first), "newest first");
    const second = listed.sessions[at(made.second)];
    assert.equal(second.title, "listed second");
    assert.equal(second.cwd, cwd);
    assert.ok(!Number.isNaN(Date.parse(second.updatedAt)), "an ISO 8601 date");

    editor.updates.length = 0;
    await ctx.request(acp.methods.agent.session.resume, { sessionId: made.first, cwd, mcpServers: [] });
    assert.ok(!editor.updates.some((u) => kind(u) === "user_message_chunk"), "no history replayed");
    const more = await prompt(ctx, made.first, "resumed");
    assert.equal(more.stopReason, "end_turn");

    await ctx.request(acp.methods.agent.session.delete, { sessionId: made.second });
    const left = await ctx.request(acp.methods.agent.session.list, { cwd });
    assert.ok(!left.sessions.some((s) => s.sessionId === made.second), "deleted");
    await assert.rejects(
      ctx.request(acp.methods.agent.session.load, { sessionId: made.second, cwd, mcpServers: [] }),
    );
  });
  console.log("ok - sessions listed, resumed and deleted by later processes");
}

// A session forked: a new session with the whole conversation, going on alone; the original
// untouched, also for a later process.
{
  const cwd = process.cwd();
  const users = (updates) =>
    updates.filter((u) => kind(u) === "user_message_chunk").map((u) => u.update.content.text);
  const made = await withAgent(async (ctx, editor) => {
    const { init, sessionId } = await session(ctx);
    assert.ok(init.agentCapabilities.sessionCapabilities.fork, JSON.stringify(init.agentCapabilities));
    await prompt(ctx, sessionId, "the question");
    const forked = await ctx.request(unstable.agent.session.fork, { sessionId, cwd, mcpServers: [] });
    assert.ok(forked.sessionId && forked.sessionId !== sessionId, JSON.stringify(forked));
    assert.equal(forked.modes.currentModeId, "ask");
    editor.updates.length = 0;
    const answer = await prompt(ctx, forked.sessionId, "only in the fork");
    assert.equal(answer.stopReason, "end_turn");
    assert.equal(text(editor.updates), "You said: only in the fork");
    assert.ok(editor.updates.every((u) => u.sessionId === forked.sessionId), "the fork's turn is the fork's");
    await assert.rejects(
      ctx.request(unstable.agent.session.fork, { sessionId: "no-such-session", cwd, mcpServers: [] }),
    );
    return { original: sessionId, fork: forked.sessionId };
  });
  await withAgent(async (ctx, editor) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    await ctx.request(acp.methods.agent.session.load, { sessionId: made.fork, cwd, mcpServers: [] });
    assert.deepEqual(users(editor.updates), ["the question", "only in the fork"]);
    assert.equal(text(editor.updates), "You said: the questionYou said: only in the fork");
    editor.updates.length = 0;
    await ctx.request(acp.methods.agent.session.load, { sessionId: made.original, cwd, mcpServers: [] });
    assert.deepEqual(users(editor.updates), ["the question"], "the original untouched");
    const listed = await ctx.request(acp.methods.agent.session.list, { cwd });
    assert.ok(listed.sessions.some((s) => s.sessionId === made.fork && s.title === "the question"));
  });
  console.log("ok - a session forked goes on alone; the original stays as it was");
}

// Sessions named and archived: the names and the archive hold for a later process (and for
// every door's thread list: they are the threads' own).
{
  const cwd = process.cwd();
  const made = await withAgent(async (ctx) => {
    const { init, sessionId } = await session(ctx);
    const caps = init.agentCapabilities.sessionCapabilities;
    assert.ok(caps.archive && caps.title, JSON.stringify(caps));
    await prompt(ctx, sessionId, "to be named");
    await ctx.request(unstable.agent.session.setTitle, { sessionId, title: "  Named  " });
    await assert.rejects(ctx.request(unstable.agent.session.setTitle, { sessionId, title: "   " }));
    await assert.rejects(ctx.request(unstable.agent.session.setTitle, { sessionId: "no-such-session", title: "x" }));
    const other = (await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] })).sessionId;
    await prompt(ctx, other, "to be archived");
    await ctx.request(unstable.agent.session.archive, { sessionId: other });
    await ctx.request(unstable.agent.session.archive, { sessionId: other });
    await assert.rejects(ctx.request(unstable.agent.session.archive, { sessionId: "no-such-session" }));
    return { named: sessionId, archived: other };
  });
  await withAgent(async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const ids = (listed) => listed.sessions.map((s) => s.sessionId);
    const everyday = await ctx.request(acp.methods.agent.session.list, { cwd });
    assert.ok(!ids(everyday).includes(made.archived), "archived: out of the everyday list");
    const named = everyday.sessions.find((s) => s.sessionId === made.named);
    assert.equal(named.title, "Named");
    assert.equal(named.archived, false);
    const shelf = await ctx.request(acp.methods.agent.session.list, { cwd, archived: "only" });
    assert.deepEqual(ids(shelf).filter((id) => id === made.archived || id === made.named), [made.archived]);
    assert.equal(shelf.sessions.find((s) => s.sessionId === made.archived).archived, true);
    const all = await ctx.request(acp.methods.agent.session.list, { cwd, archived: "include" });
    assert.ok(ids(all).includes(made.archived) && ids(all).includes(made.named));
    await ctx.request(unstable.agent.session.unarchive, { sessionId: made.archived });
    assert.ok(ids(await ctx.request(acp.methods.agent.session.list, { cwd })).includes(made.archived), "unarchived");
  });
  console.log("ok - sessions named and archived, for later processes too");
}
