// The official TypeScript ACP client (@agentclientprotocol/sdk) driving `agent-tower acp --agent
// agui:<url>`: an AG-UI agent (here `agent-tower serve`) in an editor. The agent process is the
// first argument, started with the arguments after it.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { editorClient, kind, text } from "./acp-editor.mjs";

const [bin, ...agentArgs] = process.argv.slice(2);
assert.ok(bin, "usage: node acp-bridge.mjs <agent-tower binary> [acp arguments]");

const child = spawn(bin, ["acp", ...agentArgs], { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const { editor, client } = editorClient("agent-tower-bridge-e2e");

const allow = () => ({ outcome: { outcome: "selected", optionId: "allow_once" } });
const reject = () => ({ outcome: { outcome: "selected", optionId: "reject_once" } });

try {
  await client.connectWith(stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "agent-tower-bridge-e2e", version: "0.0.0" },
    });
    const newSession = async () =>
      (await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] })).sessionId;
    /** One prompt; the updates it brought. */
    const prompt = async (sessionId, words) => {
      const from = editor.updates.length;
      const answer = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: words }],
      });
      return { answer, updates: editor.updates.slice(from) };
    };

    // 1. Reasoning, a tool the AG-UI agent runs itself, and its answer after it.
    {
      const sessionId = await newSession();
      const { answer, updates } = await prompt(sessionId, 'think: add {"a": 2, "b": 40}');
      assert.equal(answer.stopReason, "end_turn");
      assert.ok(updates.some((u) => kind(u) === "agent_thought_chunk"), "the agent's thoughts");
      const call = updates.find((u) => kind(u) === "tool_call");
      assert.equal(call.update.title, "add");
      const done = updates.find((u) => kind(u) === "tool_call_update" && u.update.status === "completed");
      assert.equal(done.update.toolCallId, call.update.toolCallId);
      assert.equal(done.update.content[0].content.text, "42");
      assert.equal(text(updates), "The `add` tool returned 42.");
      assert.equal(editor.asked.length, 0, "nothing to ask about");
      console.log("ok a turn with reasoning and a tool");

      // The ids the editor saw are the AG-UI agent's own: its thread (the session) holds them.
      const agentUrl = agentArgs[agentArgs.indexOf("--agent") + 1].replace(/^agui:/, "");
      const remote = await (await fetch(new URL(`/threads/${sessionId}`, agentUrl))).json();
      const remoteCall = remote.messages.find((m) => m.toolCalls?.length).toolCalls[0];
      assert.equal(call.update.toolCallId, remoteCall.id, "the tool call's id");
      const said = updates.filter((u) => kind(u) === "agent_message_chunk").map((u) => u.update.messageId);
      const answer_ = remote.messages.at(-1);
      assert.equal(answer_.role, "assistant");
      assert.deepEqual([...new Set(said)], [answer_.id], "the answer's message id");
      console.log("ok the AG-UI agent's message and tool call ids, end to end");

      // The same session goes on: the AG-UI agent gets the whole conversation.
      const next = await prompt(sessionId, "hello again");
      assert.equal(text(next.updates), "You said: hello again");
      console.log("ok the session goes on");
    }

    // 2. The AG-UI agent interrupts for `remember`: the editor is asked; allowed, it runs.
    {
      const sessionId = await newSession();
      editor.answer = allow;
      const { answer, updates } = await prompt(sessionId, 'remember {"key": "theme", "value": "dark"}');
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(editor.asked.length, 1, "the interrupt became a permission request");
      assert.equal(editor.asked[0].toolCall.title, "remember");
      assert.ok(editor.asked[0].announced, "the tool_call update comes before its permission request");
      const done = updates.find((u) => kind(u) === "tool_call_update" && u.update.status === "completed");
      assert.equal(done.update.content[0].content.text, "remembered theme");
      assert.equal(text(updates), "The `remember` tool returned remembered theme.");
      console.log("ok an interrupt allowed in the editor");
    }

    // 3. Rejected in the editor: the AG-UI agent is told, and goes on without the call.
    {
      const sessionId = await newSession();
      editor.answer = reject;
      const { answer, updates } = await prompt(sessionId, 'remember {"key": "font", "value": "serif"}');
      assert.equal(answer.stopReason, "end_turn");
      assert.equal(editor.asked.length, 2);
      assert.match(text(updates), /failed/, "the agent saw the call refused");
      assert.ok(!text(updates).includes("remembered"), "the call did not run");
      console.log("ok an interrupt rejected in the editor");
    }

    // 4. "Always allow" in the editor: the AG-UI agent's later interrupts for that tool in the
    //    session are answered without asking.
    {
      const sessionId = await newSession();
      editor.answer = () => ({ outcome: { outcome: "selected", optionId: "allow_always" } });
      const before = editor.asked.length;
      let { updates } = await prompt(sessionId, 'remember {"key": "mood", "value": "calm"}');
      assert.equal(editor.asked.length, before + 1, "asked once");
      assert.equal(text(updates), "The `remember` tool returned remembered mood.");
      ({ updates } = await prompt(sessionId, 'remember {"key": "mood", "value": "bright"}'));
      assert.equal(editor.asked.length, before + 1, "not asked again in the session");
      assert.equal(text(updates), "The `remember` tool returned remembered mood.");
      const agentUrl = agentArgs[agentArgs.indexOf("--agent") + 1].replace(/^agui:/, "");
      const remote = await (await fetch(new URL(`/threads/${sessionId}`, agentUrl))).json();
      assert.equal(remote.state.mood, "bright", "the second call ran on the AG-UI agent");
      console.log("ok always allowed in the editor: the next interrupt is answered unasked");
    }

    // 5. The session's MCP server lends its tools: offered to the AG-UI agent as client tools, run
    //    here when it calls them, their results sent back in the next run.
    {
      const everything = new URL("./node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url);
      const { sessionId } = await ctx.request(acp.methods.agent.session.new, {
        cwd: process.cwd(),
        mcpServers: [{ name: "every thing", command: process.execPath, args: [everything.pathname, "stdio"], env: [] }],
      });
      const { answer, updates } = await prompt(sessionId, 'every_thing__echo {"message": "from the editor"}');
      assert.equal(answer.stopReason, "end_turn");
      const call = updates.find((u) => kind(u) === "tool_call");
      assert.equal(call.update.title, "every_thing__echo");
      const done = updates.find((u) => kind(u) === "tool_call_update" && u.update.status === "completed");
      assert.match(done.update.content[0].content.text, /Echo: from the editor/);
      assert.match(text(updates), /The `every_thing__echo` tool returned Echo: from the editor/);
      console.log("ok an MCP tool of the session as the AG-UI agent's client tool");
    }

    // 6. Cancel while the AG-UI agent streams: the turn ends `cancelled`, the session goes on.
    {
      const sessionId = await newSession();
      const from = editor.updates.length;
      const answer = ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "tell me slowly" }],
      });
      await editor.waitFor((u) => kind(u) === "agent_message_chunk", from);
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      assert.equal((await answer).stopReason, "cancelled");
      const next = await prompt(sessionId, "hello");
      assert.equal(text(next.updates), "You said: hello");
      console.log("ok cancelled mid-stream, the session goes on");
    }
  });
  console.log("all bridge scenarios passed");
} finally {
  child.kill("SIGKILL");
}
