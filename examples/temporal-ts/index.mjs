// Starts a toolgate tool call from TypeScript, the way an agent backend in
// another language would: Update-with-Start of the ToolCall workflow with
// its firstOutcome Update (one round trip to the first outcome: the result,
// or the card waiting for a person), then the workflow's result (the final
// outcome). toolgate encrypts every payload, so this client encodes and
// decodes through the worker's codec endpoint (Temporal's remote codec
// protocol), with the endpoint's bearer token. It connects the way every
// Temporal client does, from Temporal's client configuration
// (@temporalio/envconfig: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TLS_*,
// TEMPORAL_API_KEY, or TEMPORAL_PROFILE in TEMPORAL_CONFIG_FILE).
//
//   TEMPORAL_ADDRESS=127.0.0.1:7233 CODEC_URL=http://127.0.0.1:8089 [CODEC_AUTH_TOKEN=…] node index.mjs
import { Client, Connection, WithStartWorkflowOperation } from "@temporalio/client";
import { loadClientConnectConfig } from "@temporalio/envconfig";

const env = (k, d) => process.env[k] || d;
const temporal = loadClientConnectConfig();
const namespace = temporal.namespace || "default";
const codecURL = env("CODEC_URL", "http://127.0.0.1:8089");
const b64 = (u8) => Buffer.from(u8).toString("base64");
const bytes = (s) => new Uint8Array(Buffer.from(s, "base64"));

// The remote codec protocol: POST {"payloads": [...]} (protobuf JSON: bytes as base64).
async function remote(path, payloads) {
  const body = JSON.stringify({
    payloads: payloads.map((p) => ({
      metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, b64(v)])),
      data: b64(p.data ?? new Uint8Array()),
    })),
  });
  const headers = { "content-type": "application/json", "x-namespace": namespace };
  if (process.env.CODEC_AUTH_TOKEN) headers.authorization = `Bearer ${process.env.CODEC_AUTH_TOKEN}`;
  const res = await fetch(codecURL + path, { method: "POST", headers, body });
  if (!res.ok) throw new Error(`codec endpoint ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()).payloads.map((p) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, bytes(v)])),
    data: bytes(p.data ?? ""),
  }));
}
const codec = { encode: (p) => remote("/encode", p), decode: (p) => remote("/decode", p) };

const connection = await Connection.connect({ address: "127.0.0.1:7233", ...temporal.connectionOptions });
const client = new Client({ connection, namespace, dataConverter: { payloadCodecs: [codec] } });

const conversation = env("CONVERSATION", "ts1"), callId = env("CALL_ID", "call1");
const input = {
  tool: "request_stock_transfer", toolCallId: callId,
  args: { articleId: 40211, quantity: Number(env("QUANTITY", "40")), reason: "stockout_risk" },
  session: { userId: "ama", role: "store_manager", storeIds: [112], sessionId: "s1", conversationId: conversation,
             credentialRef: env("CREDENTIAL_REF", "cred-ama") },
};
const start = new WithStartWorkflowOperation("ToolCall", {
  workflowId: `toolcall-${conversation}-${callId}`, taskQueue: env("TOOLGATE_TASK_QUEUE", "toolgate"), args: [input],
  workflowIdConflictPolicy: "USE_EXISTING", workflowIdReusePolicy: "ALLOW_DUPLICATE",
});
const first = await client.workflow.executeUpdateWithStart("firstOutcome", { args: [input], startWorkflowOperation: start });
console.log(JSON.stringify({ first }));
const final = await (await start.workflowHandle()).result();
console.log(JSON.stringify({ final }));
await connection.close();
