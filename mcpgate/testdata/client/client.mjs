// Drives toolgate's MCP server with the official TypeScript SDK, as an
// agent framework would: the OAuth flow against the OpenID provider the
// server's metadata names (signing in headless with a password), then
// tools/list, calls, and a card a person approves while the call waits.
// It prints one JSON object of what it saw; the Go test checks it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const { MCP_URL, MCP_CLIENT_ID, MCP_USER, MCP_PASSWORD } = process.env;
const redirectUrl = "http://127.0.0.1:33418/callback";
const state = {};

// An OAuth client provider for a public client registered with the
// provider ahead of time (no dynamic registration).
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { client_name: "toolgate TypeScript test", redirect_uris: [redirectUrl], grant_types: ["authorization_code"],
      response_types: ["code"], token_endpoint_auth_method: "none" };
  },
  clientInformation() { return { client_id: MCP_CLIENT_ID }; },
  tokens() { return state.tokens; },
  saveTokens(t) { state.tokens = t; },
  async redirectToAuthorization(url) { state.authorizationUrl = url.toString(); state.code = await signIn(url); },
  saveCodeVerifier(v) { state.verifier = v; },
  codeVerifier() { return state.verifier; },
};

// signIn plays the browser: it follows the provider's redirects with a
// cookie jar, answers the password page, and reads the code from the
// redirect to our (never listened-on) loopback callback.
async function signIn(start) {
  const cookies = new Map();
  let url = start.toString(), method = "GET", body;
  for (let i = 0; i < 20; i++) {
    const headers = { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
    if (body) headers["content-type"] = "application/x-www-form-urlencoded";
    const res = await fetch(url, { method, body, redirect: "manual", headers });
    for (const c of res.headers.getSetCookie()) {
      const [kv] = c.split(";");
      const eq = kv.indexOf("=");
      cookies.set(kv.slice(0, eq), kv.slice(eq + 1));
    }
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get("location"), url);
      if (next.toString().startsWith(redirectUrl)) return next.searchParams.get("code");
      url = next.toString(); method = "GET"; body = undefined;
      continue;
    }
    const page = await res.text();
    const id = /name="authRequestID" value="([^"]+)"/.exec(page)?.[1];
    if (!id || !page.includes('name="password"')) throw new Error(`not the provider's password page (${res.status}): ${page.slice(0, 300)}`);
    url = new URL("/login/password", url).toString(); method = "POST";
    body = new URLSearchParams({ authRequestID: id, username: MCP_USER, password: MCP_PASSWORD }).toString();
  }
  throw new Error("the sign-in did not end at the callback");
}

async function connect() {
  const client = new Client({ name: "toolgate-ts-test", version: "1.0.0" });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider }));
    return client;
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    console.error(`step: signed in through ${state.authorizationUrl}`);
  }
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider });
  await transport.finishAuth(state.code);
  await client.connect(transport);
  return client;
}

const out = {};
const step = (s) => console.error(`step: ${s}`);
step("connect");
const client = await connect();
step("connected");
out.signedIn = Boolean(state.tokens?.access_token) && Boolean(state.authorizationUrl);
if (process.env.MCP_SCRIPT === "reference") {
  // toolgate in front of the official filesystem server (make dev's
  // reference pack): a read, then a keyed write a keeper approves while the
  // client waits for it, and the same key again from a new session.
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  const read = await client.callTool({ name: "files__read_text_file", arguments: { path: process.env.NOTES_PATH } });
  out.read = { isError: Boolean(read.isError), status: read.structuredContent?.status, text: read.content[0]?.text };
  let progress = 0;
  const write = { name: "files__write_file", arguments: { path: process.env.PLAN_PATH, content: "Order 40 cases." },
    _meta: { "toolgate/idempotencyKey": "ts.write.1" } };
  const first = await client.callTool(write, CallToolResultSchema, { onprogress: () => { progress++; }, timeout: 150000, resetTimeoutOnProgress: true });
  // A server that answers a card at once (MCP_MAX_WAIT=0) is asked for the
  // call's outcome with its status tool until a person has decided.
  let status = first.structuredContent?.status;
  const callId = first.structuredContent?.callId;
  out.pendingFirst = status === "pending_approval";
  for (let i = 0; i < 240 && ["pending_approval", "deciding", "executing"].includes(status); i++) {
    await new Promise((r) => setTimeout(r, 500));
    const s = await client.callTool({ name: "toolgate_call_status", arguments: { callId } });
    status = s.structuredContent?.status;
  }
  const second = await connect();
  const again = await second.callTool(write);
  out.write = { isError: Boolean(first.isError), status, callId, progress,
    again: again.structuredContent?.callId, againStatus: again.structuredContent?.status };
  console.log(JSON.stringify(out));
  await client.close();
  await second.close();
  process.exit(0);
}
out.resourceParam = new URL(state.authorizationUrl).searchParams.get("resource");
out.server = client.getServerVersion()?.name;
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const stock = await client.callTool({ name: "get_stock", arguments: { articleId: 40211 } });
out.getStock = { isError: Boolean(stock.isError), status: stock.structuredContent?.status, text: stock.content[0]?.text };
const scope = await client.callTool({ name: "get_stock", arguments: { articleId: 40211, storeId: 118 } });
out.storeScope = { isError: Boolean(scope.isError), code: scope.structuredContent?.code };
let progress = 0;
const transfer = await client.callTool({ name: "request_stock_transfer", arguments: { articleId: 40211, quantity: 40, reason: "stockout_risk" } },
  CallToolResultSchema, { onprogress: () => { progress++; }, timeout: 90000, resetTimeoutOnProgress: true });
out.transfer = { isError: Boolean(transfer.isError), status: transfer.structuredContent?.status, callId: transfer.structuredContent?.callId, progress };
const keyed = { name: "create_task", arguments: { kind: "shelf_check", dueBy: "today" }, _meta: { "toolgate/idempotencyKey": "ts.task.1" } };
const first = await client.callTool(keyed);
const second = await connect();
const retry = await second.callTool(keyed);
out.retry = { first: first.structuredContent?.callId, again: retry.structuredContent?.callId, status: retry.structuredContent?.status };
console.log(JSON.stringify(out));
await client.close();
await second.close();
process.exit(0);
