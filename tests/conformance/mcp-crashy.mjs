// An MCP server on the official TypeScript SDK (@modelcontextprotocol/sdk), over stdio, that can
// be made to crash: `pid` answers its process id, `exit` exits (status 3) in the middle of the
// call. Both are marked read-only, so that a server's default rules let them run. For the
// supervision of MCP servers (tests/mcp.rs).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const server = new McpServer({ name: "crashy", version: "0.0.0" });
const readOnly = { annotations: { readOnlyHint: true } };
server.registerTool("pid", { description: "This server's process id.", ...readOnly }, async () => ({
  content: [{ type: "text", text: `pid ${process.pid}` }],
}));
server.registerTool("exit", { description: "Exits during the call.", ...readOnly }, async () => process.exit(3));
await server.connect(new StdioServerTransport());
