// An editor's turn survives its instance: the official TypeScript ACP client, connected over
// `/acp` to the first of two instances on one store, prompts; mid-answer the first is killed
// (SIGKILL); the editor connects to the second and loads the session, joins the turn the second
// continues once the first's lease ran out, and reads it to its end.
//
//   node acp-remote-takeover.mjs FIRST_BASE SECOND_BASE FIRST_PID
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { connectRemote, initialize, kind, prompt, text, turnEnded } from "./acp-editor.mjs";

const [first, second, pid] = process.argv.slice(2);
assert.ok(first && second && pid, "usage: node acp-remote-takeover.mjs <first> <second> <first-pid>");
const NAME = "agent-tower-takeover-e2e";

let sessionId;
await connectRemote(first, undefined, NAME, async (ctx, editor) => {
  await initialize(ctx, NAME);
  ({ sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: "/work", mcpServers: [] }));
  // Its answer was this connection's: it dies with the instance.
  prompt(ctx, sessionId, "tell me slowly").catch(() => {});
  await editor.waitFor((u) => kind(u) === "agent_message_chunk");
  process.kill(Number(pid), "SIGKILL");
});
console.log("ok - the first instance was killed mid-answer");

await connectRemote(second, undefined, NAME, async (ctx, editor) => {
  await initialize(ctx, NAME);
  const loaded = await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: "/work", mcpServers: [] });
  assert.equal(loaded._meta["acp/turnState"].running, true, "the turn is in flight");
  const ended = await turnEnded(editor);
  assert.equal(ended.update._meta["acp/turnState"].stopReason, "end_turn");
  const thread = await (await fetch(`${second}/threads/${sessionId}`)).json();
  assert.deepEqual(thread.runs.map((r) => r.status), ["finished"], "one run, continued");
  const answer = thread.messages.filter((m) => m.role === "assistant").at(-1).content;
  assert.ok(answer.split(" ").length >= 200, answer);
  // What the killed instance had said of the step it was cut in, then the step done again whole.
  assert.ok(text(editor.updates).endsWith(answer), text(editor.updates));
  const users = editor.updates.filter((u) => kind(u) === "user_message_chunk").map((u) => u.update.content.text);
  assert.deepEqual(users, ["tell me slowly"]);
});
console.log("ok - the editor, on the second instance, joined the turn to its end");
console.log("acp-remote-takeover: passed");
