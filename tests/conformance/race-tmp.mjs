import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { editorClient, kind } from "./acp-editor.mjs";
const [bin, ...args] = process.argv.slice(2);
const child = spawn(bin, ["acp", ...args], { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const { editor, client } = editorClient("race");
let bad = 0;
await client.connectWith(stream, async (ctx) => {
  await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  for (let i = 0; i < 40; i++) {
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    const from = editor.updates.length;
    const answer = ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "tell me slowly" }] });
    if (process.env.WAIT) await editor.waitFor((u) => kind(u) === "agent_message_chunk", from);
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
    const r = await answer;
    if (r.stopReason !== "cancelled") { bad++; console.log("iteration", i, r.stopReason); }
  }
});
console.log("bad", bad);
child.kill();
