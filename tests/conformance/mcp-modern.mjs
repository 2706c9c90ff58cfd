// An MCP server on the official TypeScript SDK v2 (@modelcontextprotocol/server), which speaks
// only the current protocol (2026-07-28: `server/discover`, per-request metadata, no
// `initialize`; earlier openings are refused with `legacy: 'reject'`). Its tools carry
// annotations: `lookup` is read-only, `note` changes things but is not destructive, `erase` is
// destructive; `write_word` has none (MCP then assumes a destructive tool).
//
//   node mcp-modern.mjs stdio     # over its stdin and stdout
//   node mcp-modern.mjs http      # streamable HTTP on a free port; prints its URL
import http from "node:http";
import { McpServer, createMcpHandler, fromJsonSchema } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

function server() {
  const server = new McpServer({ name: "modern", version: "1.0.0" }, { capabilities: { tools: {} } });
  const word = fromJsonSchema({
    type: "object",
    properties: { word: { type: "string" } },
    required: ["word"],
  });
  const tool = (name, description, annotations, verb) =>
    server.registerTool(name, { description, inputSchema: word, annotations }, async ({ word }) => ({
      content: [{ type: "text", text: `${word}: ${verb}` }],
    }));
  tool("lookup", "Looks a word up.", { readOnlyHint: true }, "found");
  tool("note", "Notes a word down.", { readOnlyHint: false, destructiveHint: false }, "noted");
  tool("erase", "Erases a word.", { readOnlyHint: false, destructiveHint: true }, "erased");
  tool("write_word", "Writes a word down.", undefined, "written");
  return server;
}

if (process.argv[2] === "http") {
  const handler = createMcpHandler(server, { legacy: "reject" });
  // node:http in front of the web-standard handler.
  const listener = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : v]);
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks),
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) for await (const chunk of response.body) res.write(chunk);
    res.end();
  });
  listener.listen(0, "127.0.0.1", () => console.log(`http://127.0.0.1:${listener.address().port}/mcp`));
} else {
  serveStdio(server, { legacy: "reject" });
}
