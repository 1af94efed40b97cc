// A scripted MCP client built on the official v2 TypeScript client package
// (@modelcontextprotocol/client 2.4.0), for the bridge's tests: the same job as sdk-client.mjs
// (which is built on SDK v1 and speaks only the 2025 revisions), for a client that can speak
// protocol revision 2026-07-28. Run it with the pinned Node (scripts/setup-node.sh prints its path).
//
// USAGE
//   node sdk2-client.mjs --url URL [--header 'Name: value']...                 [SCRIPT] [OPTIONS]
//   node sdk2-client.mjs --command CMD [--env K=V]... [--cwd DIR] [SCRIPT] [OPTIONS] --args ARG...
//
//   SCRIPT:   --script FILE (JSON, "-" = stdin) | --script-json 'JSON' | --list-tools (default)
//   OPTIONS:  --version-mode legacy|auto|pin   how connect() picks the protocol era (default auto):
//                 legacy  initialize only, as a 2025 client (the SDK's own default)
//                 auto    server/discover first; 2026-07-28 if offered, else the SDK falls back
//                         to initialize (a 4xx other than 401/403 over HTTP; any error, a close
//                         or a timeout over stdio)
//                 pin     2026-07-28 or nothing: connect fails unless server/discover offers it
//             --timeout-ms N      default per-request timeout (default 30000)
//             --client-name NAME  clientInfo.name (default mcp-mqtt-bridge-sdk2-client)
//
//   --url uses StreamableHTTPClientTransport; --command uses StdioClientTransport (no shell, this
//   process's environment plus any --env, the child's stderr passed through). Note that in auto
//   and pin mode the SDK's stdio transport first starts a second, short-lived copy of the command
//   just for the server/discover probe (its stderr discarded), then the real one.
//
// SCRIPT (JSON)
//   { "capabilities": {...},      optional; default { elicitation: {form: {}}, sampling: {},
//                                 roots: {} }, each answered by the responder below
//     "responders": {             answers to elicitation/create, sampling/createMessage and
//       "elicitation": ANSWER | [ANSWER, ...],       roots/list, whether they come as 2025
//       "sampling":    ANSWER | [ANSWER, ...],       server→client requests or inside a 2026
//       "roots":       ANSWER | [ANSWER, ...] },     input_required result
//         ANSWER = { "result": {...} } | { "error": { "code": N, "message": "..." } },
//                  optionally with "delayMs": N; a list is used in order, its last entry repeats.
//         Without a responder the answer is deterministic: elicitation accepts, filling each
//         requested property (string "<name>-answer", number/integer 42, boolean true, enum its
//         first value); sampling answers { role: assistant, model: "sdk2-client-model",
//         content: { type: text, text: "sampled: <text of the last message>" }, stopReason:
//         endTurn }; roots answers [{ uri: "file:///tmp/sdk2-client-root", name: "root" }].
//     "continueOnError": false,
//     "steps": [ STEP, ... ] }
//
//   Every STEP is { "op": ..., ... } and may carry "label", "timeoutMs" and "expectError": true |
//   N | "NAME" (the step succeeds only if it fails; a number matches a JSON-RPC error code, a
//   string an SDK error code such as "ERA_NEGOTIATION_FAILED" or the error's name).
//     {"op":"connection"}           the connection facts again (see "connected" below)
//     {"op":"discover"}             server/discover (2026 era only)
//     {"op":"listTools"} {"op":"listResources"} {"op":"listResourceTemplates"} {"op":"listPrompts"}
//     {"op":"callTool","name":"...","arguments":{...},"progress":true,"logLevel":"debug","meta":{...}}
//              progress: ask for notifications/progress; logLevel: put
//              io.modelcontextprotocol/logLevel in _meta (2026 era: the only way to get
//              notifications/message); meta: more _meta keys. input_required results are
//              fulfilled by the responders and retried by the SDK inside this one step.
//     {"op":"readResource","uri":"..."} {"op":"getPrompt","name":"...","arguments":{...}}
//     {"op":"complete","ref":{...},"argument":{...}}
//     {"op":"ping"} {"op":"setLoggingLevel","level":"debug"}          2025 era only
//     {"op":"subscribe","uri":"..."} {"op":"unsubscribe","uri":"..."}  2025 era only
//     {"op":"listen","name":"s1","filter":{"toolsListChanged":true,"resourceSubscriptions":[...]}}
//              subscriptions/listen (2026 era only): resolves on the acknowledgement; the result
//              is the honoured filter; the stream's notifications are printed as they come
//     {"op":"closeListen","name":"s1"}   close it (the SDK aborts the stream and sends
//              notifications/cancelled); the result says how it had ended if it already had
//     {"op":"listenClosed","name":"s1","timeoutMs":10000}   wait until it ends: local|graceful|remote
//     {"op":"request","method":"...","params":{...}}   any request; the result as received
//     {"op":"notify","method":"...","params":{...}}    any notification
//     {"op":"waitNotification","method":"...","params":{...},"count":1,"timeoutMs":10000}
//              succeeds once `count` notifications of `method` whose params contain `params`
//              (a subset match) have arrived since connecting
//     {"op":"sleep","ms":N}  {"op":"close"}
//
// OUTPUT: one JSON object per line on stdout, in the order things happened
//   {"type":"connected","era":"modern"|"legacy","protocolVersion":"...","serverInfo":{...},
//    "capabilities":{...},"instructions":"...","discover":{...}?,"sessionId":"..."?}
//   {"type":"connectFailed","error":{...}}                         then exit 3
//   {"type":"notification","method":"...","params":{...}}          as it comes off the transport
//   {"type":"serverRequest","method":"...","params":{...},"via":"request"|"input_required",
//    "answer":{"result":...}|{"error":...}}                        a responder was called
//   {"type":"step","index":0,"op":"...","label":...,"ok":true,"ms":12,"result":{...}}
//   {"type":"step","index":1,"op":"...","ok":false,"ms":3,"error":{"code":...,"message":"...","data":...}}
//   {"type":"done","ok":true,"steps":2,"failed":[]}
//   Diagnostics go to stderr.
//
// EXIT STATUS: 0 every step ok; 1 a step failed; 2 bad usage or script; 3 could not connect.
import { readFile } from 'node:fs/promises';

import { client as sdk, StdioClientTransport } from './sdk2.mjs';

const { Client, ProtocolError, SdkError, StreamableHTTPClientTransport } = sdk;

const MODERN = '2026-07-28';
const out = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const passthrough = { '~standard': { version: 1, vendor: 'sdk2-client', validate: (value) => ({ value }) } };

function usage(message) {
  if (message) console.error(`sdk2-client: ${message}`);
  (message ? console.error : console.log)(
    'usage: sdk2-client.mjs --url URL [--header "Name: value"]... [SCRIPT] [OPTIONS]\n' +
      '       sdk2-client.mjs --command CMD [--env K=V]... [--cwd DIR] [SCRIPT] [OPTIONS] --args ARG...\n' +
      'SCRIPT:  --script FILE|- | --script-json JSON | --list-tools (default)\n' +
      'OPTIONS: --version-mode legacy|auto|pin (default auto) | --timeout-ms N | --client-name NAME\n' +
      'The script format and the output are described at the top of sdk2-client.mjs.',
  );
  process.exit(message ? 2 : 0);
}

function parseArgs(argv) {
  const o = { headers: {}, env: {}, args: [], timeoutMs: 30000, clientName: 'mcp-mqtt-bridge-sdk2-client', versionMode: 'auto' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
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
      case '--version-mode':
        o.versionMode = value();
        if (!['legacy', 'auto', 'pin'].includes(o.versionMode)) usage(`--version-mode ${o.versionMode}: expected legacy, auto or pin`);
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
  if ([o.scriptFile, o.scriptJson, o.listTools].filter(Boolean).length > 1) usage('give at most one of --script, --script-json and --list-tools');
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
  let text;
  if (o.scriptFile === '-') {
    const chunks = [];
    for await (const c of process.stdin) chunks.push(c);
    text = Buffer.concat(chunks).toString('utf8');
  } else if (o.scriptFile) {
    try {
      text = await readFile(o.scriptFile, 'utf8');
    } catch (e) {
      usage(`cannot read --script ${o.scriptFile}: ${e.message}`);
    }
  } else if (o.scriptJson) {
    text = o.scriptJson;
  } else {
    return { steps: [{ op: 'listTools' }] };
  }
  let script;
  try {
    script = JSON.parse(text);
  } catch (e) {
    usage(`the script is not JSON: ${e.message}`);
  }
  if (typeof script !== 'object' || script === null || !Array.isArray(script.steps)) usage('the script must be an object with a "steps" array');
  for (const [i, step] of script.steps.entries()) {
    if (typeof step?.op !== 'string' || !(step.op in OPS)) {
      usage(`step ${i}: unknown op ${JSON.stringify(step?.op)}; known: ${Object.keys(OPS).join(', ')}`);
    }
  }
  for (const kind of Object.keys(script.responders ?? {})) {
    if (!['sampling', 'elicitation', 'roots'].includes(kind)) usage(`responders.${kind}: unknown; known: sampling, elicitation, roots`);
  }
  return script;
}

function errorJson(e) {
  if (e instanceof ProtocolError) {
    // The peer's own message is what tests compare; the SDK may prefix "MCP error <code>: ".
    const message = e.message.replace(/^MCP error -?\d+: /, '');
    return { name: 'ProtocolError', code: e.code, message, ...(e.data !== undefined && { data: e.data }) };
  }
  if (e instanceof SdkError) {
    return { name: e.name ?? 'SdkError', code: e.code, message: e.message, ...(e.data !== undefined && { data: e.data }) };
  }
  return { name: e?.name ?? 'Error', message: e?.message ?? String(e), ...(e?.code !== undefined && { code: e.code }) };
}

function contains(actual, expected) {
  if (expected === undefined) return true;
  if (expected === null || typeof expected !== 'object') return actual === expected;
  if (actual === null || typeof actual !== 'object') return false;
  return Object.entries(expected).every(([k, v]) => contains(actual[k], v));
}

// ---- deterministic default answers --------------------------------------------------------------

function defaultElicitation(params) {
  if (params?.mode === 'url') return { action: 'accept' };
  const content = {};
  for (const [name, schema] of Object.entries(params?.requestedSchema?.properties ?? {})) {
    const options = schema.enum ?? schema.oneOf?.map((o) => o.const) ?? schema.items?.enum ?? schema.items?.anyOf?.map((o) => o.const);
    if (schema.type === 'array') content[name] = options?.length ? [options[0]] : [];
    else if (options?.length) content[name] = options[0];
    else if (schema.type === 'number' || schema.type === 'integer') content[name] = 42;
    else if (schema.type === 'boolean') content[name] = true;
    else content[name] = `${name}-answer`;
  }
  return { action: 'accept', content };
}

function defaultSampling(params) {
  const last = params?.messages?.at(-1)?.content;
  const text = (Array.isArray(last) ? last : [last]).find((c) => c?.type === 'text')?.text ?? '';
  return { role: 'assistant', model: 'sdk2-client-model', content: { type: 'text', text: `sampled: ${text}` }, stopReason: 'endTurn' };
}

const DEFAULTS = {
  elicitation: defaultElicitation,
  sampling: defaultSampling,
  roots: () => ({ roots: [{ uri: 'file:///tmp/sdk2-client-root', name: 'root' }] }),
};
const METHODS = { elicitation: 'elicitation/create', sampling: 'sampling/createMessage', roots: 'roots/list' };

function responder(kind, spec, eraOf) {
  const answers = spec === undefined ? undefined : Array.isArray(spec) ? spec : [spec];
  if (answers?.length === 0) usage(`responders.${kind}: empty list`);
  let next = 0;
  return async (request) => {
    const answer = answers ? answers[Math.min(next++, answers.length - 1)] : { result: DEFAULTS[kind](request.params) };
    if (answer.delayMs) await sleep(answer.delayMs);
    const printed = answer.error ? { error: answer.error } : { result: answer.result ?? {} };
    out({
      type: 'serverRequest',
      method: request.method,
      ...(request.params !== undefined && { params: request.params }),
      via: eraOf() === 'modern' ? 'input_required' : 'request',
      answer: printed,
    });
    if (answer.error) throw new ProtocolError(answer.error.code ?? -32603, answer.error.message ?? 'error', answer.error.data);
    return answer.result ?? {};
  };
}

// ---- the steps -----------------------------------------------------------------------------------

function withMeta(s) {
  const meta = { ...(s.meta ?? {}), ...(s.logLevel !== undefined && { 'io.modelcontextprotocol/logLevel': s.logLevel }) };
  return Object.keys(meta).length ? { _meta: meta } : {};
}

const OPS = {
  connection: async (c, s, opt, ctx) => ctx.connection,
  discover: (c, s, opt) => c.discover(opt),
  listTools: (c, s, opt) => c.listTools(undefined, { ...opt, cacheMode: 'bypass' }),
  listResources: (c, s, opt) => c.listResources(undefined, { ...opt, cacheMode: 'bypass' }),
  listResourceTemplates: (c, s, opt) => c.listResourceTemplates(undefined, { ...opt, cacheMode: 'bypass' }),
  listPrompts: (c, s, opt) => c.listPrompts(undefined, { ...opt, cacheMode: 'bypass' }),
  callTool: (c, s, opt) =>
    c.callTool(
      { name: s.name, arguments: s.arguments ?? {}, ...withMeta(s) },
      // The notifications themselves are printed off the wire like every other one.
      { ...opt, ...(s.progress && { onprogress: () => {} }) },
    ),
  readResource: (c, s, opt) => c.readResource({ uri: s.uri, ...withMeta(s) }, { ...opt, cacheMode: 'bypass' }),
  getPrompt: (c, s, opt) => c.getPrompt({ name: s.name, ...(s.arguments && { arguments: s.arguments }), ...withMeta(s) }, opt),
  complete: (c, s, opt) => c.complete({ ref: s.ref, argument: s.argument, ...(s.context && { context: s.context }) }, opt),
  ping: (c, s, opt) => c.ping(opt),
  setLoggingLevel: (c, s, opt) => c.setLoggingLevel(s.level, opt),
  subscribe: (c, s, opt) => c.subscribeResource({ uri: s.uri }, opt),
  unsubscribe: (c, s, opt) => c.unsubscribeResource({ uri: s.uri }, opt),
  listen: async (c, s, opt, ctx) => {
    const name = s.name ?? 'default';
    if (ctx.subscriptions.has(name)) throw new Error(`listen "${name}" is already open`);
    const sub = await c.listen(s.filter ?? {}, { timeout: opt.timeout });
    const entry = { sub, ended: undefined };
    sub.closed.then((how) => {
      entry.ended = how;
      out({ type: 'listenClosed', name, how });
    });
    ctx.subscriptions.set(name, entry);
    return { honoredFilter: sub.honoredFilter };
  },
  closeListen: async (c, s, opt, ctx) => {
    const name = s.name ?? 'default';
    const entry = ctx.subscriptions.get(name);
    if (!entry) throw new Error(`no listen "${name}"`);
    const before = entry.ended;
    await entry.sub.close();
    ctx.subscriptions.delete(name);
    return before === undefined ? { closed: true } : { alreadyEnded: before };
  },
  listenClosed: async (c, s, opt, ctx) => {
    const entry = ctx.subscriptions.get(s.name ?? 'default');
    if (!entry) throw new Error(`no listen "${s.name ?? 'default'}"`);
    const timeout = s.timeoutMs ?? 10000;
    const how = await Promise.race([entry.sub.closed, sleep(timeout).then(() => undefined)]);
    if (how === undefined) throw new Error(`listen "${s.name ?? 'default'}" still open after ${timeout} ms`);
    return { how };
  },
  request: (c, s, opt) => c.request({ method: s.method, ...(s.params !== undefined && { params: s.params }) }, passthrough, opt),
  notify: async (c, s) => {
    await c.notification({ method: s.method, ...(s.params !== undefined && { params: s.params }) });
    return {};
  },
  waitNotification: (c, s, opt, ctx) => ctx.waitNotification(s),
  sleep: async (c, s) => {
    await sleep(s.ms ?? 0);
    return {};
  },
  close: async (c) => {
    await c.close();
    return {};
  },
};

function expectedFailure(step, error) {
  const want = step.expectError;
  if (want === undefined) return false;
  if (want === true) return true;
  return want === error.code || want === error.name;
}

// ---- main ----------------------------------------------------------------------------------------

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const script = await loadScript(o);
  const responders = script.responders ?? {};
  const capabilities = script.capabilities ?? { elicitation: { form: {} }, sampling: {}, roots: {} };

  const client = new Client(
    { name: o.clientName, version: '1.0.0' },
    {
      capabilities,
      versionNegotiation: { mode: o.versionMode === 'pin' ? { pin: MODERN } : o.versionMode },
    },
  );
  const eraOf = () => client.getProtocolEra();
  for (const kind of ['elicitation', 'sampling', 'roots']) {
    if (capabilities[kind] === undefined) {
      if (responders[kind] !== undefined) usage(`responders.${kind} given but "capabilities" does not declare ${kind}`);
      continue;
    }
    client.setRequestHandler(METHODS[kind], responder(kind, responders[kind], eraOf));
  }
  client.onerror = (e) => console.error(`sdk2-client: ${e.message}`);

  const seen = []; // every notification, for waitNotification
  const waiters = new Set();
  const transport = o.url
    ? new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers: o.headers } })
    : new StdioClientTransport({
        command: o.command,
        args: o.args,
        env: { ...process.env, ...o.env },
        ...(o.cwd && { cwd: o.cwd }),
        stderr: 'inherit',
      });
  // Print every notification where it comes off the transport, before the SDK dispatches it (the
  // SDK would drop, say, progress for a request that has already been answered).
  const watch = () => {
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (typeof message?.method === 'string' && message.id === undefined) {
        out({ type: 'notification', method: message.method, ...(message.params !== undefined && { params: message.params }) });
        seen.push(message);
        for (const w of waiters) w();
      }
      deliver?.(message, extra);
    };
  };

  const ctx = {
    subscriptions: new Map(),
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
    console.error(`sdk2-client: could not connect: ${e.message}`);
    await client.close().catch(() => {});
    process.exit(3);
  }
  watch();
  const discover = client.getDiscoverResult();
  ctx.connection = {
    era: client.getProtocolEra(),
    protocolVersion: client.getNegotiatedProtocolVersion(),
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    ...(client.getInstructions() !== undefined && { instructions: client.getInstructions() }),
    ...(discover !== undefined && { discover }),
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
      ok = step.expectError === undefined;
      out({ ...line, ok, ms: Date.now() - started, result, ...(!ok && { note: 'expected an error' }) });
    } catch (e) {
      const error = errorJson(e);
      ok = expectedFailure(step, error);
      out({ ...line, ok, ms: Date.now() - started, error });
    }
    if (!ok) {
      failed.push(index);
      if (!script.continueOnError) break;
    }
  }

  out({ type: 'done', ok: failed.length === 0, steps: script.steps.length, failed });
  for (const { sub } of ctx.subscriptions.values()) await sub.close().catch(() => {});
  await client.close().catch(() => {});
  process.exit(failed.length ? 1 : 0);
}

await main();
