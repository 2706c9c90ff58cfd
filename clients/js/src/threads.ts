// The thread list of an agent-tower server (`GET /threads`, `PATCH` and `DELETE
// /threads/{threadId}`, `POST /threads/{threadId}/fork`, and the list followed live): see the
// server's docs/threads.md.
import { errorOf } from "./error.js";

/** A thread as the list shows it. */
export interface ThreadListing {
  threadId: string;
  /** Its name, else the first line of its first prompt. */
  title: string | null;
  archived: boolean;
  /** The directory an editor's session works in. */
  workspace?: string;
  /** When its conversation last changed (RFC 3339). */
  updatedAt: string;
  /** For a fork: the thread it was forked from, and the last of its messages it kept. */
  forkedFrom?: { threadId: string; messageId: string | null };
}

/**
 * Where a fork cuts the conversation it copies: after `messageId` ("fork from here"), before
 * `beforeMessageId` (an edit of that message, or another answer in its place), or, with
 * neither, after the last message. `title` names the fork.
 */
export interface ForkOptions {
  messageId?: string;
  beforeMessageId?: string;
  title?: string;
}

/** A page of the list, and where the next one starts (`null`: this was the last). */
export interface ThreadPage {
  threads: ThreadListing[];
  next: string | null;
}

/** Which threads a page lists. */
export interface ThreadListQuery {
  /** 1 to 100 (the server's default: 20). */
  limit?: number;
  /** The `next` of the page before. */
  after?: string;
  /** `false` (the default: the everyday list), `true` (the archive) or `"all"`. */
  archived?: boolean | "all";
  /** Only threads whose title holds this text, in either case. */
  search?: string;
}

/** A change of the list, as a follower is told it. */
export type ThreadListChange =
  | { type: "THREAD_UPDATED"; thread: ThreadListing }
  | { type: "THREAD_DELETED"; threadId: string }
  /** Changes may have been missed: list again. */
  | { type: "THREADS_CHANGED" };

/** The settings of a {@link ThreadList}. */
export interface ThreadListConfig {
  /** Where the server's routes are: the root of its origin, or where it is mounted. */
  baseUrl: string;
  /** Sent with every request (the bearer token, for one). */
  headers?: Record<string, string>;
  /** The `fetch` to use (by default the global one). */
  fetch?: typeof fetch;
}

/** How long a follower waits before following again a stream that ended. */
const RECONNECT_MS = 1_000;

/** The caller's threads on an agent-tower server. */
export class ThreadList {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly fetch: typeof fetch;

  constructor(config: ThreadListConfig) {
    this.baseUrl = config.baseUrl.endsWith("/") ? config.baseUrl : `${config.baseUrl}/`;
    this.headers = config.headers ?? {};
    this.fetch = config.fetch ?? ((input, init) => fetch(input, init));
  }

  /** A page of the caller's threads, newest first. */
  async list(query: ThreadListQuery = {}): Promise<ThreadPage> {
    const params = new URLSearchParams();
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    if (query.after !== undefined) params.set("after", query.after);
    if (query.archived !== undefined) params.set("archived", String(query.archived));
    if (query.search !== undefined) params.set("q", query.search);
    const path = params.toString() === "" ? "threads" : `threads?${params}`;
    return (await this.request("GET", path)).json() as Promise<ThreadPage>;
  }

  /** Names the thread (`null`: the first line of its first prompt again). */
  rename(threadId: string, title: string | null): Promise<ThreadListing> {
    return this.change(threadId, { title });
  }

  /** Archives the thread, or takes it out of the archive. */
  archive(threadId: string, archived = true): Promise<ThreadListing> {
    return this.change(threadId, { archived });
  }

  /**
   * A new thread with the conversation of `threadId` up to a point (see {@link ForkOptions}),
   * the original untouched: continue it as any thread (its conversation is at
   * `GET /threads/{threadId}`). An edit is a fork before the message edited, then a run with the
   * new message; another answer is a fork before the answer, then a run with no new message.
   */
  async fork(threadId: string, options: ForkOptions = {}): Promise<ThreadListing> {
    const path = `threads/${encodeURIComponent(threadId)}/fork`;
    return (await this.request("POST", path, options)).json() as Promise<ThreadListing>;
  }

  /** Deletes the thread and everything of it. */
  async delete(threadId: string): Promise<void> {
    await this.request("DELETE", `threads/${encodeURIComponent(threadId)}`);
  }

  /**
   * Follows the list: `onChange` is called with each change from now on, until the returned
   * function is called. Resolves once the server follows (list after that: nothing is missed).
   * When the server ends the stream (its instance stops), it follows again, through whichever
   * instance answers, and tells `THREADS_CHANGED` (list again).
   */
  async follow(onChange: (change: ThreadListChange) => void): Promise<() => void> {
    const stop = new AbortController();
    const open = async () => {
      const response = await this.fetch(new URL("threads", this.baseUrl).href, {
        headers: { ...this.headers, Accept: "text/event-stream" },
        signal: stop.signal,
      });
      if (!response.ok || response.body === null) throw await errorOf(response, "GET threads");
      return response.body.pipeThrough(new TextDecoderStream()).getReader();
    };
    const read = async (reader: ReadableStreamDefaultReader<string>) => {
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const data = buffer
            .slice(0, end)
            .split("\n")
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trimStart())
            .join("\n");
          buffer = buffer.slice(end + 2);
          if (data !== "") onChange(JSON.parse(data) as ThreadListChange);
        }
      }
    };
    const first = await open();
    (async () => {
      let reader: ReadableStreamDefaultReader<string> | undefined = first;
      while (!stop.signal.aborted) {
        if (reader !== undefined) await read(reader).catch(() => {});
        if (stop.signal.aborted) return;
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
        reader = await open().catch(() => undefined);
        if (reader !== undefined) onChange({ type: "THREADS_CHANGED" });
      }
    })();
    return () => stop.abort();
  }

  private async change(
    threadId: string,
    change: { title?: string | null; archived?: boolean },
  ): Promise<ThreadListing> {
    const path = `threads/${encodeURIComponent(threadId)}`;
    return (await this.request("PATCH", path, change)).json() as Promise<ThreadListing>;
  }

  private async request(method: string, path: string, body?: unknown): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await this.fetch(new URL(path, this.baseUrl).href, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) throw await errorOf(response, `${method} ${path}`);
    return response;
  }
}
