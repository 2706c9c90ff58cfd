// The CopilotKit runtime in front of `agent-tower serve`, and the built page (`npm run build`).
//
//   AGENT_URL=http://127.0.0.1:8000/ PORT=3000 node server.mjs
//
// The runtime knows one agent, "default": agent-tower's AG-UI endpoint, reached with the official
// `HttpAgent`. The page talks only to this server (`/api/copilotkit`), as CopilotKit apps do; when
// agent-tower asks for a token (`--auth-token-env`), this server holds it (`AGENT_TOKEN`), never
// the page.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

const agentUrl = process.env.AGENT_URL ?? "http://127.0.0.1:8000/";
const port = Number(process.env.PORT ?? 3000);
const dist = fileURLToPath(new URL("./dist/", import.meta.url));

const headers = process.env.AGENT_TOKEN ? { Authorization: `Bearer ${process.env.AGENT_TOKEN}` } : {};

const runtime = new CopilotRuntime({
  agents: { default: new HttpAgent({ url: agentUrl, headers }) },
  runner: new InMemoryAgentRunner(),
});
const copilotkit = createCopilotNodeListener({
  runtime,
  basePath: "/api/copilotkit",
  activateChannels: false,
});

const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml" };

const server = createServer(async (req, res) => {
  if (req.url.startsWith("/api/copilotkit")) return copilotkit(req, res);
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
  const file = join(dist, path === "/" ? "index.html" : path);
  if (!file.startsWith(dist)) return void res.writeHead(404).end();
  try {
    const body = await readFile(file);
    res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
server.listen(port, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port} (agent: ${agentUrl})`);
});
