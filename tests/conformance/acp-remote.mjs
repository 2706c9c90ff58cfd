// Drives `agent-tower serve`'s `/acp` with the official TypeScript ACP client
// (@agentclientprotocol/sdk, its experimental WebSocket transport on Node's `ws`, or its
// Streamable HTTP transport with `http` as the last argument), as two principals: a turn
// streamed, an approval asked as a permission (allowed, then rejected), a cancel while
// streaming, the turns read over HTTP as the runs of the session's thread, a second connection
// that loads the session whole, a fork (listed, loaded whole, closed), a turn that goes on when
// its connection drops and is joined to its end by the next, a turn read across 20 cut
// connections resumed at their cursors, and the other principal kept out. Throws (exit code 1)
// on the first expectation that fails; prints one line per scenario.
//
//   node acp-remote.mjs http://127.0.0.1:PORT ALICE_TOKEN BOB_TOKEN [ws|http]
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
// The methods not yet stable in ACP (session/fork).
import { methods as unstable } from "@agentclientprotocol/sdk/unstable";
import { connectRemote, initialize as ask, kind, prompt, text, turnEnded } from "./acp-editor.mjs";

const [base, alice, bob, binding = "ws"] = process.argv.slice(2);
if (!bob) throw new Error("usage: node acp-remote.mjs <base url> <alice's token> <bob's token> [ws|http]");

const NAME = "agent-tower-remote-e2e";
/** A connection as the principal of `token`; `run(ctx, editor)` is what it does. */
const connect = (token, run) => connectRemote(base, token, NAME, run, binding);
const initialize = (ctx) => ask(ctx, NAME);

const load = (ctx, sessionId) =>
  ctx.request(acp.methods.agent.session.load, { sessionId, cwd: "/work", mcpServers: [] });

/** The thread of `sessionId` as `GET /threads/{id}` shows it to the principal of `token`. */
async function thread(sessionId, token) {
  const response = await fetch(`${base}/threads/${sessionId}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return { status: response.status, body: response.status === 200 ? await response.json() : null };
}

/** The tool calls among `updates` that ended with `status`. */
const ended = (updates, status) =>
  updates.filter((u) => kind(u) === "tool_call_update" && u.update.status === status);

const remember = 'remember {"key": "theme", "value": "dark"}';

let sessionId;

const scenarios = {
  async "a prompt streamed over the WebSocket"() {
    await connect(alice, async (ctx, editor) => {
      const init = await initialize(ctx);
      assert.equal(init.protocolVersion, 1);
      assert.equal(init.agentCapabilities.loadSession, true);
      assert.notEqual(init.agentCapabilities.mcpCapabilities?.http, true, "no MCP server is started for a remote editor");
      assert.deepEqual(init.authMethods.map((m) => m.id), ["agent-tower"]);
      assert.equal(init.agentCapabilities._meta["acp/transport"].resumable, true);
      assert.match(init.authMethods[0].description, /bearer token/);
      // A server the editor runs on its own machine: not started here (it would fail the request).
      const created = await ctx.request(acp.methods.agent.session.new, {
        cwd: "/work",
        mcpServers: [{ name: "local", command: "/nonexistent/mcp-server", args: [], env: [] }],
      });
      sessionId = created.sessionId;
      assert.equal(created.modes.currentModeId, "ask");
      const answer = await prompt(ctx, sessionId, "hello editor");
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(text(editor.updates), "You said: hello editor");
      assert.ok(editor.updates.every((u) => u.sessionId === sessionId));
    });
  },

  async "an approval asked as a permission, allowed: the call runs"() {
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      await load(ctx, sessionId);
      const before = editor.updates.length;
      const answer = await prompt(ctx, sessionId, remember);
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(editor.asked.length, 1, "asked once");
      const [asked] = editor.asked;
      assert.ok(asked.announced, "the call was shown before it was asked about");
      assert.equal(asked.toolCall.rawInput.key, "theme");
      assert.deepEqual(
        asked.options.map((o) => o.kind),
        ["allow_once", "allow_always", "reject_once", "reject_always"],
      );
      const turn = editor.updates.slice(before);
      const call = turn.findIndex((u) => kind(u) === "tool_call" && u.update.toolCallId === asked.toolCall.toolCallId);
      const done = turn.findIndex((u) => kind(u) === "tool_call_update" && u.update.toolCallId === asked.toolCall.toolCallId);
      assert.ok(call >= 0 && done > call, "announced, then completed");
      assert.equal(turn[done].update.status, "completed");
      assert.doesNotMatch(JSON.stringify(turn[done].update.content), /declined/);
    });
  },

  async "an approval rejected: the model reads why"() {
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      await load(ctx, sessionId);
      editor.answer = () => ({ outcome: { outcome: "selected", optionId: "reject_once" } });
      const before = editor.updates.length;
      const answer = await prompt(ctx, sessionId, remember);
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(editor.asked.length, 1);
      const turn = editor.updates.slice(before);
      assert.deepEqual(ended(turn, "completed"), []);
      const [result] = ended(turn, "failed");
      assert.equal(result.update.toolCallId, editor.asked[0].toolCall.toolCallId);
      assert.match(JSON.stringify(result.update.content), /declined `remember`/);
    });
  },

  async "cancel while streaming"() {
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      await load(ctx, sessionId);
      const before = editor.updates.length;
      const answer = prompt(ctx, sessionId, "tell me slowly");
      await editor.waitFor((u) => kind(u) === "agent_message_chunk", before);
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      assert.equal((await answer).stopReason, "cancelled");
      const seen = editor.updates.length;
      // A round trip later, nothing more of the turn arrived.
      await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
      const late = editor.updates
        .slice(seen)
        .filter((u) => !["current_mode_update", "config_option_update"].includes(kind(u)));
      assert.deepEqual(late, []);
    });
  },

  async "the turns are runs of the session's thread, over HTTP"() {
    const { status, body } = await thread(sessionId, alice);
    assert.equal(status, 200);
    const said = body.messages.filter((m) => m.role === "user").map((m) => m.content);
    assert.deepEqual(said, ["hello editor", remember, remember, "tell me slowly"]);
    assert.equal(body.messages.find((m) => m.role === "assistant").content, "You said: hello editor");
    assert.deepEqual(
      body.runs.map((r) => r.status),
      ["finished", "finished", "finished", "cancelled"],
    );
    assert.deepEqual(body.pendingInterrupts, []);
  },

  async "a second connection loads the session whole"() {
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      await load(ctx, sessionId);
      const users = editor.updates
        .filter((u) => kind(u) === "user_message_chunk")
        .map((u) => u.update.content.text);
      assert.deepEqual(users, ["hello editor", remember, remember, "tell me slowly"]);
      assert.match(text(editor.updates), /^You said: hello editor/);
      // Both calls with their ends, as they were shown live.
      assert.equal(ended(editor.updates, "completed").length, 1);
      assert.equal(ended(editor.updates, "failed").length, 1);
    });
  },

  async "fork, list and close"() {
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      const forked = await ctx.request(unstable.agent.session.fork, { sessionId, cwd: "/work", mcpServers: [] });
      assert.ok(forked.sessionId && forked.sessionId !== sessionId, JSON.stringify(forked));
      const listed = (await ctx.request(acp.methods.agent.session.list, {})).sessions.map((s) => s.sessionId);
      assert.ok(listed.includes(forked.sessionId) && listed.includes(sessionId), listed.join(" "));
      const before = editor.updates.length;
      await load(ctx, forked.sessionId);
      const users = editor.updates
        .slice(before)
        .filter((u) => kind(u) === "user_message_chunk")
        .map((u) => u.update.content.text);
      assert.deepEqual(users, ["hello editor", remember, remember, "tell me slowly"], "the whole conversation");
      await ctx.request(acp.methods.agent.session.close, { sessionId: forked.sessionId });
      await assert.rejects(prompt(ctx, forked.sessionId, "hello"), (error) => error.code === -32002);
    });
    // The original is untouched.
    const { body } = await thread(sessionId, alice);
    assert.equal(body.runs.length, 4);
  },

  async "a dropped connection does not stop its turn: the next one joins it to its end"() {
    let slow;
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      ({ sessionId: slow } = await ctx.request(acp.methods.agent.session.new, { cwd: "/work", mcpServers: [] }));
      // Its answer was this connection's: it goes with it.
      prompt(ctx, slow, "tell me slowly").catch(() => {});
      await editor.waitFor((u) => kind(u) === "agent_message_chunk");
    });
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      const loaded = await load(ctx, slow);
      assert.equal(loaded._meta["acp/turnState"].running, true, "the turn goes on");
      const ended = await turnEnded(editor);
      assert.equal(ended.update._meta["acp/turnState"].stopReason, "end_turn");
      const users = editor.updates.filter((u) => kind(u) === "user_message_chunk").map((u) => u.update.content.text);
      assert.deepEqual(users, ["tell me slowly"], "the turn's prompt, once");
      const { body } = await thread(slow, alice);
      const answer = body.messages.filter((m) => m.role === "assistant").at(-1).content;
      assert.ok(answer.length > 200, answer);
      assert.equal(text(editor.updates), answer, "the whole answer, once");
      // Each update read from the log says where it is in it, in order.
      const seqs = editor.updates
        .filter((u) => kind(u) === "agent_message_chunk")
        .map((u) => u._meta["acp/cursor"].split(":"))
        .map(([run, seq]) => (assert.equal(run, body.runs[0].runId), Number(seq)));
      assert.ok(seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]), seqs.join(" "));
    });
  },

  async "a turn read across 20 cut connections: every update once, its end once"() {
    let cut;
    let cursor;
    const received = [];
    /** Keeps what `editor` received with a cursor; whether the turn's end was among it. */
    const keep = (editor) => {
      const placed = editor.updates.filter((u) => u._meta?.["acp/cursor"]);
      received.push(...placed);
      cursor = placed.at(-1)?._meta["acp/cursor"] ?? cursor;
      return editor.updates.filter((u) => kind(u) === "session_info_update" && u.update._meta?.["acp/turnState"]?.running === false);
    };
    await connect(alice, async (ctx, editor) => {
      await initialize(ctx);
      ({ sessionId: cut } = await ctx.request(acp.methods.agent.session.new, { cwd: "/work", mcpServers: [] }));
      prompt(ctx, cut, "tell me slowly").catch(() => {});
      await editor.waitFor((u) => kind(u) === "agent_message_chunk");
      keep(editor);
    });
    const ends = [];
    let cuts = 0;
    while (ends.length === 0) {
      cuts += 1;
      await connect(alice, async (ctx, editor) => {
        await initialize(ctx);
        const resumed = await ctx.request(acp.methods.agent.session.resume, {
          sessionId: cut,
          cwd: "/work",
          mcpServers: [],
          _meta: { "acp/cursor": cursor },
        });
        assert.equal(resumed._meta["acp/turnState"].runId, cursor.split(":")[0]);
        // A few more updates of the turn (1 to 8, the same every time the test runs), or its end.
        const more = 1 + ((cuts * 7) % 8);
        const placed = () => editor.updates.filter((u) => u._meta?.["acp/cursor"]).length;
        await Promise.race([editor.waitFor(() => placed() >= more), turnEnded(editor)]);
        ends.push(...keep(editor));
      });
    }
    assert.ok(cuts >= 20, `${cuts} cuts only: the turn ended first`);
    console.log(`  ${cuts} connections after the first, ${received.length} updates`);
    assert.equal(ends.length, 1, "the end, once");
    assert.equal(ends[0].update._meta["acp/turnState"].stopReason, "end_turn");
    const places = received.map((u) => u._meta["acp/cursor"].split(":").map(Number));
    const ordered = places.every(([, seq, part], i) => {
      if (i === 0) return true;
      const [, before, partBefore] = places[i - 1];
      return seq > before || (seq === before && part > partBefore);
    });
    assert.ok(ordered, "no update twice, in the log's order");
    const { body } = await thread(cut, alice);
    const answer = body.messages.filter((m) => m.role === "assistant").at(-1).content;
    assert.equal(text(received), answer, "every update, once");
    // A cursor of another session cannot be resumed here.
    await connect(alice, async (ctx) => {
      await initialize(ctx);
      await assert.rejects(
        ctx.request(acp.methods.agent.session.resume, {
          sessionId,
          cwd: "/work",
          mcpServers: [],
          _meta: { "acp/cursor": cursor },
        }),
        (error) => error.code === -32602,
      );
    });
  },

  async "another principal's session is unknown"() {
    await connect(bob, async (ctx) => {
      await initialize(ctx);
      await assert.rejects(load(ctx, sessionId), (error) => error.code === -32002);
      await assert.rejects(prompt(ctx, sessionId, "hello"), (error) => error.code === -32002);
      const listed = await ctx.request(acp.methods.agent.session.list, {});
      assert.ok(!listed.sessions.some((s) => s.sessionId === sessionId));
    });
    assert.equal((await thread(sessionId, bob)).status, 404);
  },
};

for (const [name, scenario] of Object.entries(scenarios)) {
  // A scenario that waits for what never comes fails rather than hangs.
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name}: not over within 60 s`)), 60_000);
  });
  await Promise.race([scenario(), deadline]);
  clearTimeout(timer);
  console.log(`ok - ${name}`);
}
console.log("acp-remote: passed");
