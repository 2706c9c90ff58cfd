// The editor side of the ACP client scripts: an official TypeScript ACP client
// (@agentclientprotocol/sdk) that records the session updates it gets and answers permission
// requests with `editor.answer(params, signal)`.
import WebSocket from "ws";
import * as acp from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

/** A client named `name`, and the editor state its handlers fill. */
export function editorClient(name) {
  const editor = {
    updates: [],
    waiters: [],
    // How the next permission requests are answered: a function of (params, signal).
    answer: () => ({ outcome: { outcome: "selected", optionId: "allow_once" } }),
    asked: [],
    /** Resolves with the first update, from index `from` on (already here or to come), that `test` accepts. */
    waitFor(test, from = 0) {
      const found = this.updates.slice(from).find(test);
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => this.waiters.push({ test, resolve }));
    },
  };
  const client = acp
    .client({ name })
    .onNotification(acp.methods.client.session.update, async ({ params }) => {
      editor.updates.push(params);
      editor.waiters = editor.waiters.filter((w) => !(w.test(params) && (w.resolve(params), true)));
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params, signal }) => {
      // Whether the call was reported (`tool_call`) before the agent asked about it.
      const announced = editor.updates.some(
        (u) => kind(u) === "tool_call" && u.update.toolCallId === params.toolCall.toolCallId,
      );
      editor.asked.push({ ...params, announced });
      return editor.answer(params, signal);
    });
  return { editor, client };
}

/** The kind of a session update (`agent_message_chunk`, `tool_call`, …). */
export const kind = (u) => u.update.sessionUpdate;

/** The text of the agent's message chunks among `updates`. */
export const text = (updates) =>
  updates
    .filter((u) => kind(u) === "agent_message_chunk" && u.update.content.type === "text")
    .map((u) => u.update.content.text)
    .join("");

/**
 * Connects an editor named `name` to the `/acp` of the agent-tower server at `base`, over
 * `binding` (`ws`, the default, or `http`: Streamable HTTP), with the bearer `token` when given;
 * `run(ctx, editor)` is what it does, and the connection closes when it is done.
 */
export function connectRemote(base, token, name, run, binding = "ws") {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  const stream =
    binding === "http"
      ? createHttpStream(`${base}/acp`, { headers })
      : createWebSocketStream(`${base.replace(/^http/, "ws")}/acp`, { WebSocket, headers });
  const { editor, client } = editorClient(name);
  return client.connectWith(stream, (ctx) => run(ctx, editor));
}

/** `initialize`, as the editors of these scripts ask it. */
export const initialize = (ctx, name) =>
  ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name, version: "0.0.0" },
  });

/** A `session/prompt` of `words`. */
export const prompt = (ctx, sessionId, words) =>
  ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: words }] });

/** The `session_info_update` that says the turn the editor joined is over. */
export const turnEnded = (editor) =>
  editor.waitFor((u) => kind(u) === "session_info_update" && u.update._meta?.["acp/turnState"]?.running === false);
