// An ACP agent written with the official TypeScript SDK's agent side (@agentclientprotocol/sdk),
// shaped like a coding agent: to a prompt `edit <file>` it thinks, starts an `edit` tool call,
// asks the client's permission (unless allowed "always" in the session), and writes (nothing: it
// says so) or does not. To a prompt with `slowly` it writes 200 words, one every 50 ms, until its
// turn is cancelled; each `session/cancel` is written, as `cancelled <sessionId>`, to the named
// pipe `CANCEL_FIFO` when set. To `env` it says the names of its environment variables, to `pid`
// its process id; to `exit` it says a word and exits mid-turn; to `stubbornly` it says a word and
// never ends the turn, even cancelled. Asked after a restart to make an
// approved `Edit <file>` call again, it does (or, with `REPLAY_OTHER` set, edits `other.txt`
// instead). It does not start while the file `START_GATE` names exists, and with `AUTH_METHOD`
// set it requires that authentication. Anything else is echoed. For
// `agent-tower serve --agent 'acp:node sdk-agent.mjs'` (tests/bridge.rs).
import { appendFileSync, existsSync } from "node:fs";
import * as acp from "@agentclientprotocol/sdk";
import { serveAgent } from "./acp-agent-side.mjs";

/** The sessions whose turn was cancelled, each with what ends its turn. */
const cancelled = new Map();

if (process.env.START_GATE && existsSync(process.env.START_GATE)) process.exit(4);

let calls = 0;
/** The sessions whose user allowed editing "always": not asked again. */
const alwaysAllowed = new Set();
await serveAgent("sdk-agent", async ({ params, client }) => {
  const { sessionId } = params;
  const update = (update) => client.notify(acp.methods.client.session.update, { sessionId, update });
  const say = (text) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });
  const words = params.prompt.map((block) => block.text ?? "").join(" ").trim();
  if (words === "env") {
    await say(Object.keys(process.env).sort().join(" "));
    return { stopReason: "end_turn" };
  }
  if (words === "pid") {
    await say(`pid ${process.pid}`);
    return { stopReason: "end_turn" };
  }
  if (words === "exit") {
    await say("Leaving.");
    process.exit(3);
  }
  const again = /make this call again now: Edit (\S+)/.exec(words)?.[1];
  const file = again ? (process.env.REPLAY_OTHER ? "other.txt" : again) : /^edit (\S+)$/.exec(words)?.[1];
  if (words === "stubbornly") {
    // Never ends this turn, cancelled or not.
    await say("Hmm.");
    return new Promise(() => {});
  }
  if (words.split(/\s+/).includes("slowly")) {
    const stop = new Promise((resolve) => cancelled.set(sessionId, resolve));
    for (let n = 0; n < 200; n++) {
      const tick = new Promise((resolve) => setTimeout(() => resolve(false), 50));
      if (await Promise.race([tick, stop.then(() => true)])) return { stopReason: "cancelled" };
      await say(`word${n} `);
    }
    return { stopReason: "end_turn" };
  }
  if (!file) {
    await say(`Echo: ${words}`);
    return { stopReason: "end_turn" };
  }
  await update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: `I will edit ${file}.` } });
  const toolCallId = `edit-${++calls}`;
  await update({
    sessionUpdate: "tool_call",
    toolCallId,
    title: `Edit ${file}`,
    kind: "edit",
    status: "pending",
    rawInput: { path: file, content: "hello" },
  });
  let allowed = alwaysAllowed.has(sessionId);
  if (!allowed) {
    const answer = await client.request(acp.methods.client.session.requestPermission, {
      sessionId,
      toolCall: { toolCallId },
      options: [
        { optionId: "yes", name: "Allow", kind: "allow_once" },
        { optionId: "always", name: "Always allow", kind: "allow_always" },
        { optionId: "no", name: "Reject", kind: "reject_once" },
      ],
    });
    const chosen = answer.outcome.outcome === "selected" ? answer.outcome.optionId : "";
    if (chosen === "always") alwaysAllowed.add(sessionId);
    allowed = chosen === "yes" || chosen === "always";
  }
  const result = allowed ? `wrote ${file}` : `not allowed to write ${file}`;
  await update({
    sessionUpdate: "tool_call_update",
    toolCallId,
    status: allowed ? "completed" : "failed",
    content: [{ type: "content", content: { type: "text", text: result } }],
  });
  await say(allowed ? "Done." : "I did not write it.");
  return { stopReason: "end_turn" };
}, async ({ params }) => {
  if (process.env.CANCEL_FIFO) appendFileSync(process.env.CANCEL_FIFO, `cancelled ${params.sessionId}\n`);
  cancelled.get(params.sessionId)?.();
}, {
  authMethods: process.env.AUTH_METHOD
    ? [{ id: process.env.AUTH_METHOD, name: "Use the key", description: "SDK_AGENT_KEY from the environment" }]
    : [],
});
