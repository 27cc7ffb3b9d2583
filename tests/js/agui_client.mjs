// The official AG-UI client (@ag-ui/client HttpAgent) against the live server: one or more runs on one thread.
// argv[2]: {"url": "...", "threadId": "...", "questions": ["..."], "forwardedProps": {...}, "headers": {...}}
// Prints one JSON line: per run, the event types in order, the custom events, the result, the RUN_ERROR it
// reported or the exception runAgent threw (a protocol violation lands there),
// and the agent's messages as the client rebuilt them.
import { HttpAgent } from "@ag-ui/client";

const args = JSON.parse(process.argv[2]);
const agent = new HttpAgent({ url: args.url, threadId: args.threadId, headers: args.headers ?? {} });
const runs = [];

for (const [index, question] of args.questions.entries()) {
  agent.messages = [...agent.messages, { id: `user-${index}`, role: "user", content: question }];
  const eventTypes = [];
  const custom = [];
  const contentDeltas = [];
  let protocolVersion = null;
  let runError = null;
  const subscriber = {
    onEvent({ event }) {
      eventTypes.push(event.type);
    },
    onRunStartedEvent({ event }) {
      protocolVersion = event.protocolVersion ?? null;
    },
    onTextMessageContentEvent({ event }) {
      contentDeltas.push(event.delta);
    },
    onRunErrorEvent({ event }) {
      runError = { message: event.message, code: event.code ?? null };
    },
    onCustomEvent({ event }) {
      custom.push({ name: event.name, value: event.value });
    },
  };
  const run = { eventTypes, custom, contentDeltas };
  try {
    const outcome = await agent.runAgent({ runId: `run-${index}-${args.threadId}`, forwardedProps: args.forwardedProps ?? {} }, subscriber);
    run.result = outcome.result ?? null;
    run.newMessages = outcome.newMessages;
  } catch (error) {
    run.error = String(error?.message ?? error);
  }
  run.protocolVersion = protocolVersion;
  run.runError = runError;
  runs.push(run);
}

console.log(JSON.stringify({ runs, messages: agent.messages }));
