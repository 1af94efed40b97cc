// A scripted MCP client built on the official TypeScript SDK's Client, for the bridge's tests.
// Run it with the pinned Node (scripts/setup-node.sh prints its path).
//
// USAGE
//   node sdk-client.mjs --url URL [--header 'Name: value']...            [script] [options]
//   node sdk-client.mjs --command CMD [--env K=V]... [--cwd DIR] --args ARG...   (--args last)
//
//   script:   --script FILE (a JSON file, "-" = stdin) | --script-json 'JSON' | --list-tools
//             (no script = --list-tools: connect, list the tools, disconnect)
//   options:  --timeout-ms N      default per-request timeout (default 30000)
//             --client-name NAME  clientInfo.name (default mcp-mqtt-bridge-sdk-client)
//
//   --url uses StreamableHTTPClientTransport; --command uses StdioClientTransport, which starts
//   CMD with the arguments after --args, no shell, with this process's whole environment plus
//   any --env, and the child's stderr passed through to ours.
//
// SCRIPT (JSON)
//   { "capabilities": {...},       optional; default: sampling/elicitation/roots for each
//                                  responder given below, nothing else
//     "responders": {              canned answers to server-initiated requests
//       "sampling":    ANSWER | [ANSWER, ...],    sampling/createMessage
//       "elicitation": ANSWER | [ANSWER, ...],    elicitation/create
//       "roots":       ANSWER | [ANSWER, ...] },  roots/list
//         ANSWER = { "result": {...} } | { "error": { "code": N, "message": "..." } },
//                  optionally with "delayMs": N; a list is used in order, its last entry repeats
//     "continueOnError": false,    true: run the remaining steps after a failed one
//     "steps": [ STEP, ... ] }
//
//   Every STEP is { "op": ..., ... } and may carry "label" (echoed), "timeoutMs" (this request)
//   and "expectError": true | N (the step succeeds only if the request fails, with code N if
//   given). Connecting (initialize + initialized) happens before the first step.
//     {"op":"initialize"}          the initialize result again (serverInfo, capabilities, ...)
//     {"op":"listTools"} {"op":"listResources"} {"op":"listResourceTemplates"} {"op":"listPrompts"}
//     {"op":"callTool","name":"...","arguments":{...},"progress":true}   progress: ask for
//                                                   notifications/progress (printed as they come)
//     {"op":"readResource","uri":"..."} {"op":"subscribe","uri":"..."} {"op":"unsubscribe","uri":"..."}
//     {"op":"getPrompt","name":"...","arguments":{...}}
//     {"op":"complete","ref":{"type":"ref/prompt","name":"..."},"argument":{"name":"...","value":"..."}}
//     {"op":"ping"} {"op":"setLoggingLevel","level":"debug"} {"op":"sendRootsListChanged"}
//     {"op":"request","method":"...","params":{...}}       any request; the result as received
//     {"op":"notify","method":"...","params":{...}}        any notification
//     {"op":"waitNotification","method":"...","params":{...},"count":1,"timeoutMs":10000}
//              succeeds once `count` notifications of `method` whose params contain `params`
//              (a subset match) have arrived since connecting
//     {"op":"sleep","ms":N}
//     {"op":"terminateSession"}    HTTP only: DELETE the session
//     {"op":"close"}               disconnect now (later steps fail)
//
// OUTPUT: one JSON object per line on stdout, in the order things happened
//   {"type":"connected","serverInfo":{...},"capabilities":{...},"instructions":"...",
//    "protocolVersion":"...","sessionId":"..."}
//   {"type":"notification","method":"...","params":{...}}          every server notification,
//                                  printed as it comes off the transport, so a notification sent
//                                  before a response is always printed before that step's line
//   {"type":"serverRequest","method":"...","params":{...},"answer":{"result":...}|{"error":...}}
//   {"type":"step","index":0,"op":"callTool","label":...,"ok":true,"ms":12,"result":{...}}
//   {"type":"step","index":1,"op":"...","ok":false,"ms":3,"error":{"code":-32602,"message":"...","data":...}}
//   {"type":"done","ok":true,"steps":2,"failed":[]}
//   Diagnostics go to stderr.
//
// EXIT STATUS: 0 every step ok; 1 a step failed; 2 bad usage or script; 3 could not connect.
import { readFile } from 'node:fs/promises';

import { Client, StdioClientTransport, StreamableHTTPClientTransport, types } from './sdk.mjs';

const {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  McpError,
  ResultSchema,
} = types;

const out = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function usage(message) {
  if (message) console.error(`sdk-client: ${message}`);
  const print = message ? console.error : console.log;
  print(
    'usage: sdk-client.mjs --url URL [--header "Name: value"]... [SCRIPT] [OPTIONS]\n' +
      '       sdk-client.mjs --command CMD [--env K=V]... [--cwd DIR] [SCRIPT] [OPTIONS] --args ARG...\n' +
      'SCRIPT:  --script FILE|- | --script-json JSON | --list-tools (default)\n' +
      'OPTIONS: --timeout-ms N (default 30000) | --client-name NAME\n' +
      'The script format and the output are described at the top of sdk-client.mjs.',
  );
  process.exit(message ? 2 : 0);
}

function parseArgs(argv) {
  const o = { headers: {}, env: {}, args: [], timeoutMs: 30000, clientName: 'mcp-mqtt-bridge-sdk-client' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--url':
        o.url = value();
        break;
      case '--header': {
        const h = value();
        const colon = h.indexOf(':');
        if (colon <= 0) usage(`--header "${h}": expected "Name: value"`);
        o.headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
        break;
      }
      case '--command':
        o.command = value();
        break;
      case '--args':
        o.args = argv.slice(i + 1);
        i = argv.length;
        break;
      case '--env': {
        const kv = value();
        const eq = kv.indexOf('=');
        if (eq <= 0) usage(`--env "${kv}": expected KEY=VALUE`);
        o.env[kv.slice(0, eq)] = kv.slice(eq + 1);
        break;
      }
      case '--cwd':
        o.cwd = value();
        break;
      case '--script':
        o.scriptFile = value();
        break;
      case '--script-json':
        o.scriptJson = value();
        break;
      case '--list-tools':
        o.listTools = true;
        break;
      case '--timeout-ms':
        o.timeoutMs = Number(value());
        if (!Number.isInteger(o.timeoutMs) || o.timeoutMs <= 0) usage('--timeout-ms needs a positive integer');
        break;
      case '--client-name':
        o.clientName = value();
        break;
      case '-h':
      case '--help':
        usage();
        break;
      default:
        usage(`unknown argument "${a}"`);
    }
  }
  if (!o.url === !o.command) usage('give exactly one of --url and --command');
  if ([o.scriptFile, o.scriptJson, o.listTools].filter(Boolean).length > 1) {
    usage('give at most one of --script, --script-json and --list-tools');
  }
  if (o.url) {
    try {
      new URL(o.url);
    } catch {
      usage(`--url "${o.url}" is not a URL`);
    }
  }
  return o;
}

async function loadScript(o) {
  let textual;
  if (o.scriptFile === '-') {
    const chunks = [];
    for await (const c of process.stdin) chunks.push(c);
    textual = Buffer.concat(chunks).toString('utf8');
  } else if (o.scriptFile) {
    try {
      textual = await readFile(o.scriptFile, 'utf8');
    } catch (e) {
      usage(`cannot read --script ${o.scriptFile}: ${e.message}`);
    }
  } else if (o.scriptJson) {
    textual = o.scriptJson;
  } else {
    return { steps: [{ op: 'listTools' }] };
  }
  let script;
  try {
    script = JSON.parse(textual);
  } catch (e) {
    usage(`the script is not JSON: ${e.message}`);
  }
  if (typeof script !== 'object' || script === null || !Array.isArray(script.steps)) {
    usage('the script must be an object with a "steps" array');
  }
  for (const [i, step] of script.steps.entries()) {
    if (typeof step?.op !== 'string' || !(step.op in OPS)) {
      usage(`step ${i}: unknown op ${JSON.stringify(step?.op)}; known: ${Object.keys(OPS).join(', ')}`);
    }
  }
  for (const kind of Object.keys(script.responders ?? {})) {
    if (!['sampling', 'elicitation', 'roots'].includes(kind)) {
      usage(`responders.${kind}: unknown; known: sampling, elicitation, roots`);
    }
  }
  return script;
}

function errorJson(e) {
  if (e instanceof McpError) {
    // The SDK prefixes "MCP error <code>: "; the peer's own message is what tests compare.
    const message = e.message.replace(/^MCP error -?\d+: /, '');
    return { code: e.code, message, ...(e.data !== undefined && { data: e.data }) };
  }
  return { name: e?.name ?? 'Error', message: e?.message ?? String(e), ...(e?.code !== undefined && { code: e.code }) };
}

function contains(actual, expected) {
  if (expected === undefined) return true;
  if (expected === null || typeof expected !== 'object') return actual === expected;
  if (actual === null || typeof actual !== 'object') return false;
  return Object.entries(expected).every(([k, v]) => contains(actual[k], v));
}

// ---- the steps ----------------------------------------------------------------------------------

const OPS = {
  initialize: async (c, s, opt, ctx) => ctx.connection,
  listTools: (c, s, opt) => c.listTools({}, opt),
  listResources: (c, s, opt) => c.listResources({}, opt),
  listResourceTemplates: (c, s, opt) => c.listResourceTemplates({}, opt),
  listPrompts: (c, s, opt) => c.listPrompts({}, opt),
  callTool: (c, s, opt, ctx) =>
    c.callTool({ name: s.name, arguments: s.arguments ?? {} }, CallToolResultSchema, {
      ...opt,
      // The notifications themselves are printed off the wire like every other one.
      ...(s.progress && { onprogress: () => {} }),
    }),
  readResource: (c, s, opt) => c.readResource({ uri: s.uri }, opt),
  subscribe: (c, s, opt) => c.subscribeResource({ uri: s.uri }, opt),
  unsubscribe: (c, s, opt) => c.unsubscribeResource({ uri: s.uri }, opt),
  getPrompt: (c, s, opt) => c.getPrompt({ name: s.name, ...(s.arguments && { arguments: s.arguments }) }, opt),
  complete: (c, s, opt) =>
    c.complete({ ref: s.ref, argument: s.argument, ...(s.context && { context: s.context }) }, opt),
  ping: (c, s, opt) => c.ping(opt),
  setLoggingLevel: (c, s, opt) => c.setLoggingLevel(s.level, opt),
  sendRootsListChanged: async (c) => {
    await c.sendRootsListChanged();
    return {};
  },
  request: (c, s, opt) =>
    c.request({ method: s.method, ...(s.params !== undefined && { params: s.params }) }, ResultSchema.passthrough(), opt),
  notify: async (c, s) => {
    await c.notification({ method: s.method, ...(s.params !== undefined && { params: s.params }) });
    return {};
  },
  waitNotification: (c, s, opt, ctx) => ctx.waitNotification(s),
  sleep: async (c, s) => {
    await sleep(s.ms ?? 0);
    return {};
  },
  terminateSession: async (c, s, opt, ctx) => {
    if (!ctx.transport.terminateSession) throw new Error('terminateSession works only with --url');
    await ctx.transport.terminateSession();
    return {};
  },
  close: async (c) => {
    await c.close();
    return {};
  },
};

// ---- main ---------------------------------------------------------------------------------------

function responder(kind, spec) {
  const answers = Array.isArray(spec) ? spec : [spec];
  if (answers.length === 0) usage(`responders.${kind}: empty list`);
  let next = 0;
  return async (request) => {
    const answer = answers[Math.min(next++, answers.length - 1)];
    if (answer.delayMs) await sleep(answer.delayMs);
    const printed = answer.error ? { error: answer.error } : { result: answer.result ?? {} };
    out({ type: 'serverRequest', method: request.method, params: request.params, answer: printed });
    if (answer.error) throw new McpError(answer.error.code ?? -32603, answer.error.message ?? 'error', answer.error.data);
    return answer.result ?? {};
  };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const script = await loadScript(o);
  const responders = script.responders ?? {};
  const capabilities = script.capabilities ?? {
    ...(responders.sampling && { sampling: {} }),
    ...(responders.elicitation && { elicitation: {} }),
    ...(responders.roots && { roots: { listChanged: true } }),
  };

  const client = new Client({ name: o.clientName, version: '1.0.0' }, { capabilities });
  const SCHEMAS = { sampling: CreateMessageRequestSchema, elicitation: ElicitRequestSchema, roots: ListRootsRequestSchema };
  for (const [kind, spec] of Object.entries(responders)) {
    try {
      client.setRequestHandler(SCHEMAS[kind], responder(kind, spec));
    } catch (e) {
      usage(`responders.${kind}: ${e.message} (declare it in "capabilities")`);
    }
  }

  const seen = []; // every notification, for waitNotification
  const waiters = new Set();
  client.fallbackRequestHandler = async (request) => {
    const error = { code: -32601, message: `sdk-client has no answer for ${request.method}; add a responder` };
    out({ type: 'serverRequest', method: request.method, params: request.params, answer: { error } });
    throw new McpError(error.code, error.message);
  };
  client.onerror = (e) => console.error(`sdk-client: ${e.message}`);

  const transport = o.url
    ? new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers: o.headers } })
    : new StdioClientTransport({
        command: o.command,
        args: o.args,
        env: { ...process.env, ...o.env },
        ...(o.cwd && { cwd: o.cwd }),
        stderr: 'inherit',
      });

  const ctx = {
    transport,
    waitNotification: (s) =>
      new Promise((resolve, reject) => {
        const count = s.count ?? 1;
        const matching = () => seen.filter((n) => n.method === s.method && contains(n.params, s.params));
        const check = () => {
          const m = matching();
          if (m.length < count) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve({ matched: m.length, notifications: m });
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out after ${s.timeoutMs ?? 10000} ms: ${matching().length} of ${count} ${s.method} notification(s)`));
        }, s.timeoutMs ?? 10000);
        waiters.add(check);
        check();
      }),
  };

  try {
    await client.connect(transport, { timeout: o.timeoutMs });
  } catch (e) {
    out({ type: 'connectFailed', error: errorJson(e) });
    console.error(`sdk-client: could not connect: ${e.message}`);
    await client.close().catch(() => {});
    process.exit(3);
  }
  // Watch notifications where they enter the SDK: its handlers run a microtask late, after a
  // response read in the same chunk has been handled, and it drops progress for finished requests.
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (typeof message?.method === 'string' && message.id === undefined) {
      out({ type: 'notification', method: message.method, ...(message.params !== undefined && { params: message.params }) });
      seen.push(message);
      for (const w of waiters) w();
    }
    deliver?.(message, extra);
  };
  ctx.connection = {
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    ...(client.getInstructions() !== undefined && { instructions: client.getInstructions() }),
    ...(transport.protocolVersion !== undefined && { protocolVersion: transport.protocolVersion }),
    ...(transport.sessionId !== undefined && { sessionId: transport.sessionId }),
  };
  out({ type: 'connected', ...ctx.connection });

  const failed = [];
  for (const [index, step] of script.steps.entries()) {
    const started = Date.now();
    const line = { type: 'step', index, op: step.op, ...(step.label !== undefined && { label: step.label }) };
    const opt = { timeout: step.timeoutMs ?? o.timeoutMs };
    let ok;
    try {
      const result = await OPS[step.op](client, step, opt, ctx);
      ok = !step.expectError;
      out({ ...line, ok, ms: Date.now() - started, result, ...(!ok && { note: 'expected an error' }) });
    } catch (e) {
      const error = errorJson(e);
      ok = step.expectError === true || (step.expectError !== undefined && step.expectError === error.code);
      out({ ...line, ok, ms: Date.now() - started, error });
    }
    if (!ok) {
      failed.push(index);
      if (!script.continueOnError) break;
    }
  }

  out({ type: 'done', ok: failed.length === 0, steps: script.steps.length, failed });
  await client.close().catch(() => {});
  process.exit(failed.length ? 1 : 0);
}

await main();
