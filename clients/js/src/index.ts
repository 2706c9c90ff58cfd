// AG-UI clients for agent-tower servers.
//
// `AgentTowerAgent` is the official `HttpAgent` with what agent-tower adds to AG-UI:
// - `connectAgent()` restores a thread (its conversation, its state, the interrupts it waits on)
//   and re-joins its run in flight, from `GET /threads/{threadId}/events`;
// - its runs survive a reload: it says it re-joins them (`Prefer: rejoin`), and the server keeps a
//   run whose connection dropped for its re-join grace (a plain client's is cancelled at once);
// - its runs survive a deploy: when the server's instance stops while a run goes on elsewhere,
//   the stream ends with the server's `agent_tower.rejoin` notice, and the agent follows the
//   rest of the run (`GET /runs/{runId}/events` with `Last-Event-ID`) in the same stream;
// - `abortRun()` cancels the run on the server (`POST /runs/{runId}/cancel`), whichever
//   instance drives it, instead of only dropping the connection;
// - `getCapabilities()` reads `GET /capabilities`.
//
// `AgentTowerRunner` is an agent runner for the CopilotKit runtime that keeps nothing in memory:
// the server has every thread and run, so a reloaded page, another runtime instance or a
// restarted one finds them there.
import { EventType, HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import type { BaseEvent, CustomEvent, HttpAgentConfig, RunAgentInput } from "@ag-ui/client";
import { Observable, finalize } from "rxjs";
import { errorOf } from "./error.js";

export { AgentTowerError } from "./error.js";
export {
  type ForkOptions,
  ThreadList,
  type ThreadListChange,
  type ThreadListConfig,
  type ThreadListing,
  type ThreadListQuery,
  type ThreadPage,
} from "./threads.js";

/** The settings of an {@link AgentTowerAgent}. */
export interface AgentTowerAgentConfig extends HttpAgentConfig {
  /**
   * Where the server's routes are (`threads/…`, `runs/…`, `capabilities`): by default the
   * root of `url`'s origin.
   */
  baseUrl?: string;
}

/** What a server declares it supports (AG-UI 1.0 `AgentCapabilities`). */
export type Capabilities = Record<string, unknown>;

/** The official `HttpAgent`, connected to a thread of an agent-tower server. */
export class AgentTowerAgent extends HttpAgent {
  baseUrl: string;
  /** The run this agent last started: the one `abortRun()` cancels. */
  private runId?: string;

  constructor(config: AgentTowerAgentConfig) {
    super(config);
    this.baseUrl = withSlash(config.baseUrl ?? new URL("/", config.url).href);
  }

  run(input: RunAgentInput): Observable<BaseEvent> {
    this.runId = input.runId;
    return this.following(super.run(input), 0);
  }

  /**
   * `events`, and when they end with the server's `agent_tower.rejoin` notice (its instance
   * stopped while the run goes on elsewhere), the rest of the run from where they stopped,
   * for up to {@link MAX_REJOINS} such notices. The notice itself is not passed on.
   */
  private following(events: Observable<BaseEvent>, rejoins: number): Observable<BaseEvent> {
    return new Observable<BaseEvent>((subscriber) => {
      let notice: Rejoin | undefined;
      let rest: { unsubscribe(): void } | undefined;
      const first = events.subscribe({
        next: (event) => {
          const rejoin = rejoinOf(event);
          if (rejoin) notice = rejoin;
          else subscriber.next(event);
        },
        error: (error) => subscriber.error(error),
        complete: () => {
          if (notice === undefined || rejoins >= MAX_REJOINS) {
            subscriber.complete();
            return;
          }
          const after = this.runEvents(notice.runId, notice.lastEventId);
          rest = this.following(after, rejoins + 1).subscribe(subscriber);
        },
      });
      return () => {
        first.unsubscribe();
        rest?.unsubscribe();
      };
    });
  }

  /**
   * The events of `runId` after `lastEventId` (`GET /runs/{runId}/events`), to the run's end.
   * The request is tried again a few times while no server answers it (the instance that told
   * the client to re-join is going away; another takes over).
   */
  runEvents(runId: string, lastEventId: string): Observable<BaseEvent> {
    const url = new URL(`runs/${encodeURIComponent(runId)}/events`, this.baseUrl).href;
    const init: RequestInit = {
      headers: { ...this.headers, Accept: "text/event-stream", "Last-Event-ID": lastEventId },
      signal: this.abortController.signal,
    };
    return transformHttpEventStream(
      runHttpRequest(() => retried(() => this.fetch(url, init))),
      this.debugLogger,
    );
  }

  /**
   * The run request, saying that this client re-joins its run after a reload (`Prefer: rejoin`):
   * the server keeps a run whose connection dropped for its re-join grace, where it cancels a
   * plain client's at once (its Stop). This client stops a run with {@link abortRun}.
   */
  protected requestInit(input: RunAgentInput): RequestInit {
    const init = super.requestInit(input);
    return { ...init, headers: { ...(init.headers as Record<string, string>), Prefer: "rejoin" } };
  }

  /**
   * The thread `threadId` as events: its conversation, its state and the interrupts it waits
   * on, then its run in flight, if any, to the run's end. Nothing for a thread the server does
   * not have.
   */
  threadEvents(threadId: string): Observable<BaseEvent> {
    const url = new URL(`threads/${encodeURIComponent(threadId)}/events`, this.baseUrl).href;
    const init: RequestInit = {
      headers: { ...this.headers, Accept: "text/event-stream" },
      signal: this.abortController.signal,
    };
    return transformHttpEventStream(
      runHttpRequest(async () => {
        const response = await this.fetch(url, init);
        // A thread the server does not have (or that is not the caller's): nothing to restore.
        return response.status === 404 ? emptyStream() : response;
      }),
      this.debugLogger,
    );
  }

  /** Restores `input.threadId` (called by `connectAgent()`). */
  protected connect(input: RunAgentInput): Observable<BaseEvent> {
    return this.threadEvents(input.threadId);
  }

  /** Cancels the run on the server, then stops reading it. */
  abortRun(): void {
    const runId = this.runId;
    if (runId === undefined) {
      super.abortRun();
      return;
    }
    this.cancel(runId)
      .catch(() => {})
      .finally(() => super.abortRun());
  }

  /**
   * Cancels `runId` on the server, whichever instance drives it; resolves once the server took
   * the request (the run's stream then ends `cancelled`).
   */
  async cancel(runId: string): Promise<void> {
    await this.request("POST", `runs/${encodeURIComponent(runId)}/cancel`);
  }

  /** What the server declares it supports (`GET /capabilities`). */
  async getCapabilities(): Promise<Capabilities> {
    return (await this.request("GET", "capabilities")).json() as Promise<Capabilities>;
  }

  clone(): AgentTowerAgent {
    const clone = super.clone() as AgentTowerAgent;
    clone.baseUrl = this.baseUrl;
    return clone;
  }

  private async request(method: string, path: string): Promise<Response> {
    const response = await this.fetch(new URL(path, this.baseUrl).href, {
      method,
      headers: { ...this.headers, Accept: "application/json" },
    });
    if (!response.ok) throw await errorOf(response, `${method} ${path}`);
    return response;
  }
}

/** The settings of an {@link AgentTowerRunner}. */
export interface AgentTowerRunnerConfig {
  /** The server's run endpoint (its `POST` route), as given to the agents. */
  url: string;
  /** Headers for the requests the runner makes without a page's request (a token). */
  headers?: Record<string, string>;
  /** Where the server's routes are; see {@link AgentTowerAgentConfig.baseUrl}. */
  baseUrl?: string;
}

/** What the CopilotKit runtime asks a runner to run. */
interface RunRequest {
  threadId: string;
  agent: HttpAgent;
  input: RunAgentInput;
}

/**
 * An agent runner for the CopilotKit runtime (`new CopilotRuntime({ agents, runner })`) backed
 * by the agent-tower server: runs go to the server, `connect` restores a thread from it (a
 * reloaded page shows its conversation, re-joins its run in flight, and shows the approval it
 * waits on), `stop` cancels on the server. It keeps only the runs it started, until they end.
 */
export class AgentTowerRunner {
  private readonly config: AgentTowerRunnerConfig;
  /** The runs started here, by thread: the agent that runs each (it can cancel it). */
  private readonly running = new Map<string, { agent: HttpAgent; runId: string }>();
  /** The headers last used for each thread (its page's credentials), the newest last. */
  private readonly credentials = new Map<string, Record<string, string>>();

  constructor(config: AgentTowerRunnerConfig) {
    this.config = config;
  }

  run(request: RunRequest): Observable<BaseEvent> {
    const { threadId, agent, input } = request;
    this.remember(threadId, agent.headers);
    this.running.set(threadId, { agent, runId: input.runId });
    return agent.run(input).pipe(
      finalize(() => {
        if (this.running.get(threadId)?.runId === input.runId) this.running.delete(threadId);
      }),
    );
  }

  connect(request: { threadId: string; headers?: Record<string, string> }): Observable<BaseEvent> {
    if (request.headers) this.remember(request.threadId, request.headers);
    return this.agent(request.threadId).threadEvents(request.threadId);
  }

  async isRunning(request: { threadId: string }): Promise<boolean> {
    if (this.running.has(request.threadId)) return true;
    return (await this.activeRun(request.threadId)) !== undefined;
  }

  async stop(request: { threadId: string; runId?: string }): Promise<boolean> {
    const local = this.running.get(request.threadId);
    const runId = local?.runId ?? (await this.activeRun(request.threadId));
    if (runId === undefined || (request.runId !== undefined && request.runId !== runId)) {
      return false;
    }
    if (local) local.agent.abortRun();
    else await this.agent(request.threadId).cancel(runId);
    return true;
  }

  /** The id of the thread's run in flight, as the server has it. */
  private async activeRun(threadId: string): Promise<string | undefined> {
    const agent = this.agent(threadId);
    const response = await agent.fetch(
      new URL(`threads/${encodeURIComponent(threadId)}`, agent.baseUrl).href,
      { headers: { ...agent.headers, Accept: "application/json" } },
    );
    if (!response.ok) return undefined;
    const thread = (await response.json()) as { runs?: { runId: string; status: string }[] };
    return thread.runs?.findLast((run) => run.status === "running")?.runId;
  }

  /** An agent for `threadId`, with the credentials its page last brought. */
  private agent(threadId: string): AgentTowerAgent {
    return new AgentTowerAgent({
      url: this.config.url,
      baseUrl: this.config.baseUrl,
      threadId,
      headers: { ...this.config.headers, ...this.credentials.get(threadId) },
    });
  }

  private remember(threadId: string, headers: Record<string, string>): void {
    this.credentials.delete(threadId);
    this.credentials.set(threadId, headers);
    // Bounded: the oldest threads' credentials go first (they come back with the next request).
    while (this.credentials.size > MAX_REMEMBERED) {
      this.credentials.delete(this.credentials.keys().next().value as string);
    }
  }
}

/** How many threads' credentials a runner remembers. */
const MAX_REMEMBERED = 10_000;

/** The name of the server's notice that a run goes on elsewhere. */
const REJOIN = "agent_tower.rejoin";

/** How many times in a row one run is re-joined. */
const MAX_REJOINS = 5;

/** Where to re-join a run: the value of the server's `agent_tower.rejoin` notice. */
interface Rejoin {
  runId: string;
  lastEventId: string;
}

/** The re-join `event` asks for, if it is the server's notice. */
function rejoinOf(event: BaseEvent): Rejoin | undefined {
  if (event.type !== EventType.CUSTOM || (event as CustomEvent).name !== REJOIN) return undefined;
  const value = (event as CustomEvent).value as Partial<Rejoin> | undefined;
  return typeof value?.runId === "string" && typeof value.lastEventId === "string"
    ? { runId: value.runId, lastEventId: value.lastEventId }
    : undefined;
}

/**
 * `request`, tried again (up to 6 times in about 8 s) while it fails to connect or is answered
 * `503` (an instance stopping); any other answer is returned.
 */
async function retried(request: () => Promise<Response>): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    const last = attempt === 5;
    try {
      const response = await request();
      if (response.status !== 503 || last) return response;
    } catch (error) {
      if (last || (error as Error).name === "AbortError") throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
  }
}

function withSlash(url: string): string {
  return url.endsWith("/") ? url : `${url}/`;
}

/** An empty event stream. */
function emptyStream(): Response {
  return new Response("", { status: 200, headers: { "Content-Type": "text/event-stream" } });
}
