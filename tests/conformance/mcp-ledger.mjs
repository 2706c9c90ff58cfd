// An MCP server on the official TypeScript SDK v2 (@modelcontextprotocol/server) whose tools
// write down every call they start, with the idempotency key the client sent in `_meta`, as a
// JSON line of the file named by LEDGER: what a test counts to know how often a tool ran.
// `record` changes things (MCP's defaults: destructive, not idempotent); `lookup` only reads.
// Each takes a little while, so that a server killed at a random point may cut a call.
//
//   LEDGER=/tmp/ledger.jsonl node mcp-ledger.mjs
import { appendFileSync } from "node:fs";
import { McpServer, fromJsonSchema } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

const KEY = "dev.agent-tower/idempotencyKey";

function server() {
  const server = new McpServer({ name: "ledger", version: "1.0.0" }, { capabilities: { tools: {} } });
  const note = fromJsonSchema({
    type: "object",
    properties: { note: { type: "string" } },
    required: ["note"],
  });
  const tool = (name, description, annotations) =>
    server.registerTool(name, { description, inputSchema: note, annotations }, async ({ note }, ctx) => {
      const key = ctx?.mcpReq?._meta?.[KEY] ?? null;
      appendFileSync(process.env.LEDGER, JSON.stringify({ tool: name, key, note }) + "\n");
      await new Promise((done) => setTimeout(done, 60));
      return { content: [{ type: "text", text: `${name}: ${note}` }] };
    });
  tool("record", "Records a note.", { readOnlyHint: false });
  tool("lookup", "Looks a note up.", { readOnlyHint: true });
  return server;
}

serveStdio(server, { legacy: "reject" });
