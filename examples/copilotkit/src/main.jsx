// A CopilotKit page on agent-tower: the chat, a frontend tool run in the page, the shared state
// shown and set here, tool calls that wait for approval (`remember`) answered in the chat, and
// the thread list (new, switch, rename, archive, delete), live across tabs.
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  CopilotChat,
  CopilotKit,
  useAgent,
  useFrontendTool,
  useInterrupt,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import "./approval.css";
import { ThreadList } from "@agent-tower/client";
import { z } from "zod";

/** `set_background`: a tool the page offers the agent, run here. */
function useBackgroundTool(setBackground) {
  useFrontendTool({
    name: "set_background",
    description: "Sets the background colour of the page.",
    parameters: z.object({ color: z.string().describe("a CSS colour") }),
    handler: async ({ color }) => {
      setBackground(color);
      return `background set to ${color}`;
    },
  });
}

/** The approval card of a tool call agent-tower interrupted (approve, always, edit, reject). */
function Approval({ interrupt, resolve, cancel }) {
  const meta = interrupt?.metadata ?? {};
  const [args, setArgs] = useState(JSON.stringify(meta.arguments ?? {}));
  const [feedback, setFeedback] = useState("");
  return (
    <div className="approval" data-interrupt-id={interrupt?.id}>
      <p>{interrupt?.message}</p>
      <label>
        Arguments
        <textarea aria-label="arguments" value={args} onChange={(e) => setArgs(e.target.value)} />
      </label>
      <label>
        Feedback for the model, if you reject it
        <input aria-label="feedback" value={feedback} onChange={(e) => setFeedback(e.target.value)} />
      </label>
      <div className="actions">
        <button className="primary" onClick={() => resolve({ approved: true })}>Approve</button>
        {/* agent-tower then runs the tool's later calls in this thread without asking */}
        <button onClick={() => resolve({ approved: true, always: true })}>Always approve</button>
        <button onClick={() => resolve({ approved: true, editedArgs: JSON.parse(args) })}>
          Approve edited
        </button>
        <button onClick={() => resolve({ approved: false, feedback })}>Reject</button>
        <button onClick={() => cancel()}>Dismiss</button>
      </div>
    </div>
  );
}

/** The thread this page shows: `?thread=ID`, else the one kept across reloads, else a new one
 * (agent-tower keeps its conversation). */
function pageThread() {
  const threadId =
    new URLSearchParams(location.search).get("thread") ??
    localStorage.getItem("agent-tower-thread") ??
    crypto.randomUUID();
  localStorage.setItem("agent-tower-thread", threadId);
  return threadId;
}

const threadId = pageThread();

/** Shows thread `id` (a new one when none): the page again, on it. */
function open(id = crypto.randomUUID()) {
  localStorage.setItem("agent-tower-thread", id);
  location.search = `?thread=${encodeURIComponent(id)}`;
}

/** The user's threads, through this page's server (`/api/threads`). */
const threadList = new ThreadList({ baseUrl: `${location.origin}/api/` });

/** `threads` with `changed` in its place (newest first), or without it once archived. */
function withChange(threads, changed) {
  const others = threads.filter((t) => t.threadId !== changed.threadId);
  if (changed.archived) return others;
  return [changed, ...others].sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
}

/** The thread list: followed live, then read, so that no change between the two is missed. */
function useThreads() {
  const [threads, setThreads] = useState([]);
  useEffect(() => {
    let stop;
    let left = false;
    const read = () =>
      threadList.list({ limit: 100 }).then((page) => left || setThreads(page.threads));
    threadList
      .follow((change) => {
        if (change.type === "THREAD_UPDATED") setThreads((ts) => withChange(ts, change.thread));
        else if (change.type === "THREAD_DELETED")
          setThreads((ts) => ts.filter((t) => t.threadId !== change.threadId));
        else read();
      })
      .then((unfollow) => {
        stop = unfollow;
        if (left) unfollow();
        return read();
      })
      .catch((error) => console.error("the thread list is not available", error));
    return () => {
      left = true;
      stop?.();
    };
  }, []);
  return threads;
}

/** The user's threads, newest first: open one, or a new one; rename, archive or delete one. */
function Threads() {
  const threads = useThreads();
  const rename = (thread) => {
    const title = prompt("Name the thread", thread.title ?? "");
    if (title !== null) threadList.rename(thread.threadId, title.trim() === "" ? null : title);
  };
  const remove = async (thread) => {
    await threadList.delete(thread.threadId);
    if (thread.threadId === threadId) open();
  };
  return (
    <nav id="threads" aria-label="threads">
      <button id="new-thread" onClick={() => open()}>New thread</button>
      <ul>
        {threads.map((thread) => (
          <li
            key={thread.threadId}
            data-thread-id={thread.threadId}
            aria-current={thread.threadId === threadId ? "page" : undefined}
          >
            <button className="title" onClick={() => open(thread.threadId)}>
              {thread.title ?? "New thread"}
            </button>
            <button aria-label="rename" onClick={() => rename(thread)}>✎</button>
            <button aria-label="archive" onClick={() => threadList.archive(thread.threadId)}>⤓</button>
            <button aria-label="delete" onClick={() => remove(thread)}>✕</button>
          </li>
        ))}
      </ul>
    </nav>
  );
}

function App() {
  const [background, setBackground] = useState("white");
  const { agent, isReady } = useAgent();
  useBackgroundTool(setBackground);
  useInterrupt({ render: (props) => <Approval {...props} /> });
  return (
    <main data-ready={isReady} style={{ background, display: "flex", height: "100vh" }}>
      <Threads />
      <section style={{ flex: 2, minWidth: 0 }}>
        <CopilotChat threadId={threadId} />
      </section>
      <aside style={{ flex: 1, padding: "1em" }}>
        <p>
          thread <code id="thread">{agent.threadId}</code>
        </p>
        <h2>State</h2>
        <pre id="state">{JSON.stringify(agent.state ?? {}, null, 2)}</pre>
        <button id="set-mood" onClick={() => agent.setState({ ...agent.state, mood: "calm" })}>
          Set mood: calm
        </button>
        <p id="background">background: {background}</p>
      </aside>
    </main>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <CopilotKit runtimeUrl="/api/copilotkit">
      <App />
    </CopilotKit>
  </StrictMode>,
);
