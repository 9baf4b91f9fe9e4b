// Drives a Roundtable agent's A2A endpoint with the official JavaScript client
// (@a2a-js/sdk 1.3.0) over one transport, and prints what it saw as one JSON object.
//
// Usage: node a2a_client.mjs HUB_URL OWNER/NAME TOKEN TRANSPORT PREFIX
//   TRANSPORT: JSONRPC or HTTP+JSON. The SDK is found at $A2A_JS_SDK (its package folder).
//
// The flow: a blocking SendMessage, GetTask of it, a SendStreamingMessage (every update),
// a question answered over two turns (streaming), CancelTask of a task nobody answers, and
// ListTasks page by page.

import path from "node:path";

const [hub, handle, token, transport, prefix] = process.argv.slice(2);
const sdk = process.env.A2A_JS_SDK;
const client_ = await import(path.join(sdk, "dist/client/index.js"));
const root = await import(path.join(sdk, "dist/index.js"));
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } =
  client_;
const { TaskState, Role } = root;

// Every request carries the token; the card is public and fetched without it.
const authed = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [
      new JsonRpcTransportFactory({ fetchImpl: authed }),
      new RestTransportFactory({ fetchImpl: authed }),
    ],
    preferredTransports: [transport],
  }),
);
const client = await factory.createFromUrl(`${hub}/a2a/${handle}/.well-known/agent-card.json`, "");

const state = (value) => TaskState[value];
const text = (parts) =>
  (parts ?? []).map((part) => (part.content?.$case === "text" ? part.content.value : "")).join(" ");
const message = (id, words, taskId = "") => ({
  message: {
    messageId: `${prefix}-${id}`,
    contextId: "",
    taskId,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: words }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
});
const summary = (task) => ({
  id: task.id,
  context: task.contextId,
  state: state(task.status?.state),
  artifacts: (task.artifacts ?? []).map((artifact) => text(artifact.parts)),
});
const follow = async (stream) => {
  const updates = [];
  for await (const event of stream) {
    const payload = event.payload;
    if (payload?.$case === "task") {
      updates.push({ kind: "task", id: payload.value.id, state: state(payload.value.status?.state) });
    } else if (payload?.$case === "statusUpdate") {
      updates.push({ kind: "status", state: state(payload.value.status?.state) });
    } else if (payload?.$case === "artifactUpdate") {
      updates.push({ kind: "artifact", text: text(payload.value.artifact?.parts) });
    } else {
      updates.push({ kind: payload?.$case ?? "unknown" });
    }
  }
  return updates;
};

const out = { transport };
try {
  const sent = await client.sendMessage(message("block", `${prefix} blocking`));
  out.blocking = summary(sent);
  out.got = summary(await client.getTask({ id: sent.id, historyLength: 10, tenant: "" }));
  out.streamed = await follow(client.sendMessageStream(message("stream", `${prefix} streaming`)));
  const asked = await follow(client.sendMessageStream(message("ask", "merge it?")));
  out.asked = asked;
  const taskId = asked[0].id;
  out.answered = await follow(client.sendMessageStream(message("answer", "main", taskId)));
  const slow = await client.sendMessage({
    ...message("slow", "slow"),
    configuration: { returnImmediately: true, acceptedOutputModes: [], historyLength: undefined, taskPushNotificationConfig: undefined },
  });
  out.canceled = summary(await client.cancelTask({ id: slow.id, tenant: "", metadata: undefined }));
  const ids = [];
  let pageToken = "";
  do {
    const page = await client.listTasks({
      pageSize: 2,
      pageToken,
      tenant: "",
      // Given, or the SDK sends the enum it cannot name ("UNRECOGNIZED").
      status: TaskState.TASK_STATE_UNSPECIFIED,
    });
    ids.push(...page.tasks.map((task) => task.id));
    pageToken = page.nextPageToken;
  } while (pageToken);
  out.listed = ids;
} catch (error) {
  out.error = `${error?.constructor?.name}: ${error?.message}`;
}
console.log(JSON.stringify(out));
