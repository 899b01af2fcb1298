// Drives toolgate's MCP server with the official TypeScript client 2.x at
// protocol 2026-07-28, declaring URL elicitation, for
// TestTheTypeScriptClientConfirmsByURL and TestASignInByURLCarriesTheCallOn:
// it calls MCP_TOOL (request_stock_transfer) with MCP_ARGS, and answers the
// input request MCP_ASK (confirm). One JSON object a line on stdout.
// MCP_ELICIT=form declares form elicitation alone (for
// TestTheTypeScriptClientConfirmsInAForm): a line approve or reject
// answers the form with that decision, decline or cancel as itself.
//
// MODE=auto: the client's own multi-round-trip loop. Its elicitation
// handler prints the URL it is sent to and answers with the next line on
// stdin (accept, decline or cancel); the call's final result follows.
// MODE=manual: the loop off. It asks once, then echoes the requestState as
// another person (MCP_OTHER_TOKEN), as itself (dismissed: the call as it
// stands), and as itself again (a replay), printing each outcome.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import readline from 'node:readline';

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const lines = readline.createInterface({ input: process.stdin });
const waiting = [];
lines.on('line', (l) => waiting.shift()?.(l.trim()));
const nextLine = () => new Promise((resolve) => waiting.push(resolve));

async function connect(token, autoFulfill) {
  const client = new Client({ name: 'toolgate-ts2-test', version: '1' }, {
    capabilities: { elicitation: process.env.MCP_ELICIT === 'form' ? { form: {} } : { url: {} } },
    versionNegotiation: { mode: { pin: '2026-07-28' } },
    inputRequired: { autoFulfill },
  });
  client.setRequestHandler('elicitation/create', async (request) => {
    out({ event: 'elicit', mode: request.params.mode ?? 'form', url: request.params.url, message: request.params.message,
      choices: request.params.requestedSchema?.properties?.decision?.enum });
    const line = await nextLine();
    if (line === 'approve' || line === 'reject') return { action: 'accept', content: { decision: line } };
    return { action: line };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(process.env.MCP_URL),
    { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

const ask = process.env.MCP_ASK ?? 'confirm';
const call = { name: process.env.MCP_TOOL ?? 'request_stock_transfer', arguments: JSON.parse(process.env.MCP_ARGS), _meta: { 'toolgate/conversation': 'ts2' } };
const outcome = async (p) => {
  try {
    const r = await p;
    if (r.resultType === 'input_required') return { inputRequired: true, url: r.inputRequests?.[ask]?.params?.url ?? r.inputRequests?.[ask]?.url };
    return { isError: !!r.isError, status: r.structuredContent?.status, callId: r.structuredContent?.callId };
  } catch (e) {
    return { error: String(e?.message ?? e) };
  }
};

if (process.env.MODE === 'manual') {
  const ama = await connect(process.env.MCP_TOKEN, false);
  const first = await ama.callTool(call, { allowInputRequired: true });
  out({ event: 'asked', inputRequired: first.resultType === 'input_required', stateLength: (first.requestState ?? '').length });
  const echo = (answer) => ({ ...call, requestState: first.requestState, inputResponses: { [ask]: { action: answer } } });
  const other = await connect(process.env.MCP_OTHER_TOKEN, false);
  out({ event: 'other', ...(await outcome(other.callTool(echo('accept'), { allowInputRequired: true }))) });
  out({ event: 'dismissed', ...(await outcome(ama.callTool(echo('cancel'), { allowInputRequired: true }))) });
  out({ event: 'replayed', ...(await outcome(ama.callTool(echo('cancel'), { allowInputRequired: true }))) });
  await other.close();
  await ama.close();
} else {
  const ama = await connect(process.env.MCP_TOKEN, true);
  out({ event: 'result', ...(await outcome(ama.callTool(call))) });
  await ama.close();
}
lines.close();
