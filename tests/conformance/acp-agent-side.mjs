// The agent side of the official TypeScript ACP SDK (@agentclientprotocol/sdk) on this process's
// stdio, for agents written in the test scripts: `initialize` and `session/new` answered, every
// `session/prompt` handed to `prompt({ params, client })`, every `session/cancel` to `cancel`.
// With `authMethods`, `initialize` lists them and `session/new` is refused (auth required) until
// `authenticate` named one of them.
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

/** Serves `prompt` (and `cancel`, if given) as the agent `name` until the client goes away. */
export async function serveAgent(name, prompt, cancel = async () => {}, { authMethods = [] } = {}) {
  let sessions = 0;
  let authenticated = authMethods.length === 0;
  const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
  const connection = acp
    .agent({ name })
    .onRequest(acp.methods.agent.initialize, async () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {},
      authMethods,
    }))
    .onRequest(acp.methods.agent.authenticate, async ({ params }) => {
      if (!authMethods.some((method) => method.id === params.methodId)) {
        throw acp.RequestError.invalidParams({ methodId: params.methodId }, "unknown method");
      }
      authenticated = true;
      return {};
    })
    .onRequest(acp.methods.agent.session.new, async () => {
      if (!authenticated) throw acp.RequestError.authRequired();
      return { sessionId: `s${++sessions}` };
    })
    .onRequest(acp.methods.agent.session.prompt, prompt)
    .onNotification(acp.methods.agent.session.cancel, cancel)
    .connect(stream);
  await connection.closed;
}
