// The CopilotKit runtime in front of `agent-tower serve`, and the built page (`npm run build`).
//
//   AGENT_URL=http://127.0.0.1:8000/ PORT=3000 node server.mjs
//
// The runtime knows one agent, "default": agent-tower's AG-UI endpoint, reached with
// `@agent-tower/client`'s `AgentTowerAgent` (the official `HttpAgent`, whose Stop cancels the run
// on the server). Its runner is `AgentTowerRunner`: threads and runs live in agent-tower, so a
// reloaded page gets its conversation back, re-joins the run in flight and sees the approval it
// waits on, whichever runtime instance it reaches. The page talks only to this server
// (`/api/copilotkit`), as CopilotKit apps do; when agent-tower asks for a token
// (`--auth-token-env`), this server holds it (`AGENT_TOKEN`), never the page.
//
// Only this server's own pages may use the runtime: a page on another site can send a `text/plain`
// POST anywhere without asking first, and the runtime would forward it to the agent; such
// requests (`Sec-Fetch-Site` or `Origin` naming another site) are refused with 403. The page is
// served with a Content-Security-Policy that lets it load nothing from elsewhere: an image in a
// model's answer (Markdown `![](https://…)`) is not fetched, so it cannot carry the conversation
// away.
//
// With `AGENT_CLIENT=ag-ui`, the runtime reaches agent-tower as an app without
// `@agent-tower/client` does: the official `HttpAgent` and CopilotKit's own in-memory runner. The
// chat, tools, approvals and Stop work; a reload through another runtime instance, or after a
// restart of this one, does not get the conversation back (docs/copilotkit.md).
//
// The page's thread list (new, switch, rename, archive, delete, live across tabs) reads
// agent-tower's thread routes through this server, under `/api/threads`, with the same
// credentials and the same refusal of other sites' pages as the runtime.
//
// With many users, this server is a trusted front (agent-tower's `--front-token-env`): it holds
// the front token (`AGENT_FRONT_TOKEN`), authenticates its own users, and names the one each
// request acts for in `X-Agent-Tower-User`; agent-tower then keeps each user's threads apart. The
// login here is a stand-in for your application's own: `/login?user=NAME` signs NAME into a
// cookie, asking no password.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { HttpAgent } from "@ag-ui/client";
import { AgentTowerAgent, AgentTowerRunner } from "@agent-tower/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

const agentUrl = process.env.AGENT_URL ?? "http://127.0.0.1:8000/";
const port = Number(process.env.PORT ?? 3000);
const dist = fileURLToPath(new URL("./dist/", import.meta.url));

const headers = process.env.AGENT_TOKEN ? { Authorization: `Bearer ${process.env.AGENT_TOKEN}` } : {};
const front = process.env.AGENT_FRONT_TOKEN;

// The stand-in login: a user name and its signature, in a cookie only this server can make.
const secret = randomBytes(32);
const sign = (user) => createHmac("sha256", secret).update(user).digest("base64url");
function signedIn(cookieHeader) {
  const cookie = (cookieHeader ?? "").split(/;\s*/).find((c) => c.startsWith("session="));
  const [user, signature] = decodeURIComponent(cookie?.slice("session=".length) ?? "").split(".");
  if (!user || !signature) return undefined;
  const expected = Buffer.from(sign(user));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected) ? user : undefined;
}

const plain = process.env.AGENT_CLIENT === "ag-ui";
const Agent = plain ? HttpAgent : AgentTowerAgent;
const runtime = new CopilotRuntime({
  agents: front
    ? // One agent per request, acting for the request's user; what the browser sends in
      // `X-Agent-Tower-User` is never forwarded (this server's headers win anyway).
      ({ request }) => ({
        default: new Agent({
          url: agentUrl,
          headers: {
            Authorization: `Bearer ${front}`,
            "X-Agent-Tower-User": signedIn(request.headers.get("cookie")),
          },
        }),
      })
    : { default: new Agent({ url: agentUrl, headers }) },
  // Without a runner, CopilotKit's own: in memory, in this process.
  ...(plain ? {} : { runner: new AgentTowerRunner({ url: agentUrl, headers }) }),
  forwardHeaders: { deny: ["x-agent-tower-user"] },
});
const copilotkit = createCopilotNodeListener({
  runtime,
  basePath: "/api/copilotkit",
  activateChannels: false,
});

/**
 * Whether `req` comes from this server's own pages (or from no browser at all: a request
 * without `Sec-Fetch-Site` nor `Origin`, such as curl's).
 */
function fromOwnPage(req) {
  const site = req.headers["sec-fetch-site"];
  if (site !== undefined) return site === "same-origin";
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

/** The credentials this server sends agent-tower for `req`: its token, or, as a trusted front,
 * the front token and the signed-in user. */
function agentHeaders(req) {
  return front
    ? { Authorization: `Bearer ${front}`, "X-Agent-Tower-User": signedIn(req.headers.cookie) }
    : headers;
}

/** The thread routes the page's thread list uses (docs/threads.md): the method, and the path
 * after `/api/`. */
const threadRoutes = [
  ["GET", /^threads$/],
  ["GET", /^threads\/[^/]+$/],
  ["PATCH", /^threads\/[^/]+$/],
  ["DELETE", /^threads\/[^/]+$/],
  ["POST", /^threads\/[^/]+\/fork$/],
];

/** The largest request body passed on (a title, a fork's options). */
const MAX_BODY = 16 * 1024;

/**
 * The page's thread list, from agent-tower's thread routes under `/api/threads`: the same
 * requests with this server's credentials, answered as agent-tower answers them, the live list
 * (`Accept: text/event-stream`) streamed until the page leaves.
 */
async function threads(req, res) {
  const url = new URL(req.url, "http://x");
  const path = url.pathname.slice("/api/".length);
  if (!threadRoutes.some(([method, route]) => method === req.method && route.test(path))) {
    return void res.writeHead(404).end();
  }
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) return void res.writeHead(413).end("a request of at most 16 KiB");
    chunks.push(chunk);
  }
  const left = new AbortController();
  res.on("close", () => left.abort());
  const answer = await fetch(new URL(path + url.search, agentUrl), {
    method: req.method,
    headers: {
      ...agentHeaders(req),
      accept: req.headers.accept ?? "application/json",
      ...(chunks.length > 0 && { "content-type": "application/json" }),
    },
    body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
    signal: left.signal,
  }).catch(() => undefined);
  if (answer === undefined) return void (res.headersSent || res.writeHead(502).end());
  res.writeHead(answer.status, {
    "content-type": answer.headers.get("content-type") ?? "application/json",
    "cache-control": "no-store",
  });
  // The live list's page knows it is followed once these arrive, before any change.
  res.flushHeaders();
  if (answer.body === null) return void res.end();
  Readable.fromWeb(answer.body)
    .on("error", () => res.end())
    .pipe(res);
}

/** What the page may load: its own files, and nothing from elsewhere. */
const contentSecurityPolicy = [
  "default-src 'self'",
  "img-src 'self' data:",
  "style-src 'self' 'unsafe-inline'",
  // CopilotKit's chat brings its font inline.
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml" };

const server = createServer(async (req, res) => {
  if (front && req.url.startsWith("/login?")) {
    const user = new URL(req.url, "http://x").searchParams.get("user") ?? "";
    if (!/^[A-Za-z0-9._@-]{1,64}$/.test(user)) return void res.writeHead(400).end("a user name, please");
    const session = encodeURIComponent(`${user}.${sign(user)}`);
    const cookie = `session=${session}; HttpOnly; SameSite=Strict; Path=/`;
    return void res.writeHead(303, { location: "/", "set-cookie": cookie }).end();
  }
  const api = req.url.startsWith("/api/copilotkit") || /^\/api\/threads(\/|\?|$)/.test(req.url);
  if (api) {
    if (!fromOwnPage(req)) return void res.writeHead(403).end("only this site's pages may use the runtime");
    if (front && !signedIn(req.headers.cookie)) return void res.writeHead(401).end("sign in first");
    return req.url.startsWith("/api/copilotkit") ? copilotkit(req, res) : threads(req, res);
  }
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
  const file = join(dist, path === "/" ? "index.html" : path);
  if (!file.startsWith(dist)) return void res.writeHead(404).end();
  try {
    const body = await readFile(file);
    res
      .writeHead(200, {
        "content-type": types[extname(file)] ?? "application/octet-stream",
        "content-security-policy": contentSecurityPolicy,
        "x-content-type-options": "nosniff",
      })
      .end(body);
  } catch {
    res.writeHead(404).end();
  }
});
server.listen(port, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port} (agent: ${agentUrl})`);
});
