// The ACP bench's client (`cargo bench --bench acp_updates`): the official TypeScript ACP client
// (@agentclientprotocol/sdk) over stdio, counting `agent_message_chunk` updates per second.
//
//   node acp-updates.mjs <words> <rounds> <agent command> [arguments…]
//   node acp-updates.mjs <words> <rounds> --sdk-agent
//
// Each round sends one prompt of <words> words; the agent answers "You said: <the words>", one
// chunk a word. A round is timed from the prompt's request to its response, and checked: every
// chunk arrived, in order, before the response. Prints one JSON line per round:
// {"chunks": N, "ms": T, "updates_per_s": U, "client_cpu": C, "agent_cpu_us": A}: C is the share
// of one core this client used during the round (near 1: the client is what limits the rate), A
// the agent process's CPU time in the round, in microseconds (from /proc; null elsewhere).
//
// `--sdk-agent` starts the same answer written with the SDK's own agent side (this file, run with
// `agent` as its only argument), for comparison.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { serveAgent } from "./acp-agent-side.mjs";

/** "You said: a b c" in the chunks our scripted model streams: each word with its following space. */
function chunksOf(words) {
  const text = `You said: ${words}`;
  return text.match(/\S+\s*/g);
}

/** CPU time of process `pid` so far, in microseconds (Linux), or null. */
function cpuMicros(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime (fields 14 and 15 of the line), in clock ticks of 10 ms.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return null;
  }
}

if (process.argv[2] === "agent") {
  await serveAgent("sdk-agent", async ({ params, client }) => {
    const words = params.prompt.map((block) => block.text).join("");
    for (const chunk of chunksOf(words)) {
      await client.notify(acp.methods.client.session.update, {
        sessionId: params.sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: chunk } },
      });
    }
    return { stopReason: "end_turn" };
  });
} else {
  const [words, rounds, ...command] = process.argv.slice(2);
  if (!command.length) throw new Error("usage: node acp-updates.mjs <words> <rounds> <agent command…>");
  const [bin, ...args] =
    command[0] === "--sdk-agent" ? [process.execPath, fileURLToPath(import.meta.url), "agent"] : command;
  const child = spawn(bin, args, { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  let received = [];
  const client = acp
    .client({ name: "acp-updates" })
    .onNotification(acp.methods.client.session.update, async ({ params }) => {
      if (params.update.sessionUpdate === "agent_message_chunk") received.push(params.update.content.text);
    });
  const prompt = Array.from({ length: Number(words) }, (_, i) => `w${i}`).join(" ");
  const expected = chunksOf(prompt);
  try {
    await client.connectWith(stream, async (ctx) => {
      await ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
      });
      for (let round = 0; round < Number(rounds); round++) {
        const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
        received = [];
        const agentBefore = cpuMicros(child.pid);
        const cpuBefore = process.cpuUsage();
        const started = process.hrtime.bigint();
        const answer = await ctx.request(acp.methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: prompt }],
        });
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        const cpu = process.cpuUsage(cpuBefore);
        const agentAfter = cpuMicros(child.pid);
        assert.equal(answer.stopReason, "end_turn");
        assert.equal(received.length, expected.length, "every chunk before the response");
        assert.equal(received.join(""), expected.join(""));
        const chunks = received.length;
        console.log(
          JSON.stringify({
            chunks,
            ms,
            updates_per_s: Math.round((chunks * 1000) / ms),
            client_cpu: (cpu.user + cpu.system) / 1000 / ms,
            agent_cpu_us: agentBefore === null || agentAfter === null ? null : agentAfter - agentBefore,
          }),
        );
      }
    });
  } finally {
    child.kill("SIGKILL");
  }
}
