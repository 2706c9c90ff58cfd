// An A2A agent on the official Python SDK (a2a_agent.py) bridged by `agent-tower serve --agent
// a2a:<url>`, driven by the official AG-UI client (@ag-ui/client HttpAgent): its answers stream,
// one thread is one A2A context (the agent counts the messages it saw there), its question
// (input-required) is the run's answer and the next message answers it, and Stop cancels its task.
//
//   node a2a-bridge.mjs http://127.0.0.1:PORT/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const url = process.argv[2];
assert.ok(url, "usage: node a2a-bridge.mjs <agent-tower url>");

const agent = new HttpAgent({ url, threadId: randomUUID() });
/** One run of `words` on the thread; the text the agent answered, and every event's type. */
async function say(words, { onText } = {}) {
  agent.addMessage({ id: randomUUID(), role: "user", content: words });
  const types = [];
  let text = "";
  await agent.runAgent(
    {},
    {
      onEvent: ({ event }) => void types.push(event.type),
      onTextMessageContentEvent: ({ event }) => {
        text += event.delta;
        onText?.(text);
      },
    },
  );
  return { text, types };
}

const hello = await say("hello");
assert.equal(hello.text, "You said: hello (message 1 of this context)");
assert.ok(hello.types.includes("REASONING_MESSAGE_CONTENT"), "what the agent says while it works is its reasoning");
assert.equal(hello.types.at(-1), "RUN_FINISHED");
const again = await say("and again");
assert.equal(again.text, "You said: and again (message 2 of this context)", "the same A2A context");
console.log("ok answers stream; one thread is one context");

const asked = await say("please confirm");
assert.equal(asked.text, "Are you sure? Answer yes or no.");
assert.equal(asked.types.at(-1), "RUN_FINISHED");
const answered = await say("yes");
assert.equal(answered.text, "Confirmed.", "the next message answered the task that asked");
console.log("ok its question is the run's answer; the next message answers it");

let stopped = false;
await say("answer slowly", {
  onText: (text) => {
    if (!stopped && text.length > 20) {
      stopped = true;
      agent.abortRun();
    }
  },
}).catch(() => {});
assert.ok(stopped, "stopped mid-answer");
console.log("ok stopped mid-answer");
console.log("a2a-bridge: passed");
