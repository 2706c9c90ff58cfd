// The official TypeScript ACP client (@agentclientprotocol/sdk) driving `agent-tower acp --agent
// a2a:<url>`: an A2A agent on the official Python SDK (a2a_agent.py) in an editor. Its answers
// stream as the agent's message, a session is one A2A context, its question ends the turn and the
// next prompt answers it, and `session/cancel` cancels its task.
//
//   node acp-a2a.mjs <agent-tower binary> <a2a url>
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { editorClient, kind, text } from "./acp-editor.mjs";

const [bin, url] = process.argv.slice(2);
assert.ok(bin && url, "usage: node acp-a2a.mjs <agent-tower binary> <a2a url>");

const child = spawn(bin, ["acp", "--store", "none", "--agent", `a2a:${url}`], { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const { editor, client } = editorClient("agent-tower-a2a-e2e");

try {
  await client.connectWith(stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "agent-tower-a2a-e2e", version: "0.0.0" },
    });
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    const prompt = async (words) => {
      const from = editor.updates.length;
      const answer = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: words }] });
      return { answer, updates: editor.updates.slice(from) };
    };

    const hello = await prompt("hello");
    assert.equal(hello.answer.stopReason, "end_turn");
    assert.equal(text(hello.updates), "You said: hello (message 1 of this context)");
    assert.ok(hello.updates.some((u) => kind(u) === "agent_thought_chunk"), "its working status as thoughts");
    const again = await prompt("and again");
    assert.equal(text(again.updates), "You said: and again (message 2 of this context)");
    console.log("ok answers stream; a session is one context");

    const asked = await prompt("please confirm");
    assert.equal(asked.answer.stopReason, "end_turn");
    assert.equal(text(asked.updates), "Are you sure? Answer yes or no.");
    const answered = await prompt("no thanks");
    assert.equal(text(answered.updates), "Not confirmed: no thanks");
    console.log("ok its question ends the turn; the next prompt answers it");

    const from = editor.updates.length;
    const slow = ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "answer slowly" }] });
    await editor.waitFor((u) => kind(u) === "agent_message_chunk", from);
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
    assert.equal((await slow).stopReason, "cancelled");
    // The session goes on (and its agent had the cancellation sent before this prompt).
    const after = await prompt("still there?");
    assert.match(text(after.updates), /^You said: still there\? \(message \d+ of this context\)$/);
    console.log("ok session/cancel cancelled the turn");
  });
  console.log("acp-a2a: passed");
} finally {
  child.kill();
}
