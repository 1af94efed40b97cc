// A test MCP server built on the official v2 TypeScript server package
// (@modelcontextprotocol/server 2.4.0), which speaks protocol revision 2026-07-28 ("modern": no
// initialize, a _meta envelope on every request, input_required results instead of
// server→client requests, subscriptions/listen) and, unless told not to, the 2025 revisions.
// The bridge's tests put it behind the HTTP and stdio egress and call it through the ingress.
// Run it with the pinned Node (scripts/setup-node.sh prints its path).
//
// USAGE
//   node sdk2-server.mjs --http  [--host 127.0.0.1] [--port 0] [--legacy reject|allow|stateless]
//   node sdk2-server.mjs --stdio [--legacy reject|allow]
//
//   --http serves only /mcp. Once it listens it prints exactly one line on stdout:
//            MCP_FIXTURE_URL=http://127.0.0.1:<port>/mcp
//          Requests whose Host or Origin is not a loopback name get 403 (the SDK's own checks).
//   --legacy  what a 2025-era request (initialize and everything without the _meta envelope)
//          gets:
//            allow (default)  served with sessions (Mcp-Session-Id, GET stream, server→client
//                             requests on the POST's SSE stream), one server instance per
//                             session; modern requests go to createMcpHandler
//            reject           createMcpHandler(factory, { legacy: 'reject' }): a 2026-only
//                             server; initialize gets 400 / -32022 naming 2026-07-28
//            stateless        createMcpHandler(factory) as is: the SDK's default, which answers
//                             each 2025 request from a fresh instance without sessions (so a
//                             server→client request can never be answered; kept to show that)
//          Over stdio: allow = serveStdio's default (a connection that opens with initialize is
//          served as 2025 for its lifetime), reject = serveStdio(factory, { legacy: 'reject' }).
//   Diagnostics go to stderr. SIGTERM/SIGINT close everything and exit 0; --stdio also exits when
//   stdin closes.
//
// WHAT IT SERVES (the same definitions in both eras; a handler that returns
// inputRequired(...) is fulfilled by the client on a 2026 request and by the SDK's legacy shim,
// as real server→client requests, on a 2025 session)
//   Every tool answers with one text block holding a JSON "report" (also as structuredContent):
//     { "tool", "era": "modern"|"legacy", "arguments", "protocolVersion"?, "clientInfo"?,
//       "clientCapabilities"?, "logLevel"?, "progressToken"?, ...tool-specific fields }
//   so a test can see what reached the server through the bridge.
//   tools
//     echo {message}            report.message
//     progress {steps=3, delayMs=20}
//                               notifications/progress 1..steps of steps (when the request has a
//                               progressToken) and one notifications/message "progress step i"
//                               per step (level info; a 2026 request gets them only with a
//                               logLevel in _meta, a 2025 session per logging/setLevel);
//                               report.progressSent, report.logsSent
//     ask_elicitation {message="What is your name?"}
//                               input_required: { answer: elicitation/create (form, one string
//                               property "name") }; then report.answer = the ElicitResult
//     ask_sampling {prompt="Say something"}
//                               two rounds in sequence: first { first: sampling/createMessage
//                               "<prompt> (1 of 2)" }, then { second: ... "(2 of 2)" } with the
//                               first answer carried in an HMAC-protected requestState; then
//                               report.first, report.second (the CreateMessageResults) and
//                               report.rounds = 3
//     list_roots                input_required: { roots: roots/list }; then report.roots
//     trigger_list_changed {list="tools"}
//                               tools|prompts|resources: toggles the tool dynamic_tool (for
//                               "tools") and sends the list_changed notification to every
//                               listener (2026 subscriptions/listen streams, 2025 sessions)
//     update_resource {uri="test://watched"}
//                               bumps that resource's version and sends
//                               notifications/resources/updated to every listener subscribed to it
//     sleep {ms=1000}           answers after ms, or never once cancelled; report.cancelled
//     dynamic_tool              listed and callable only while toggled on by trigger_list_changed
//   resources   test://static (text "static"), test://watched (text "version N"; subscribable)
//   prompts     greeting {name}
//   capabilities  tools/prompts/resources with listChanged, resources.subscribe, logging
import { randomBytes, randomUUID } from 'node:crypto';

import { createFetchServer, listen, serveStdio, server as sdk, versions } from './sdk2.mjs';

const {
  McpServer,
  createMcpHandler,
  createRequestStateCodec,
  fromJsonSchema,
  hostHeaderValidationResponse,
  inputRequired,
  inputResponse,
  isLegacyRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
  WebStandardStreamableHTTPServerTransport,
} = sdk;

const log = (...a) => console.error('sdk2-server:', ...a);
const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

function usage(message) {
  if (message) console.error(`sdk2-server: ${message}`);
  (message ? console.error : console.log)(
    'usage: sdk2-server.mjs --http [--host H] [--port P] [--legacy reject|allow|stateless]\n' +
      '       sdk2-server.mjs --stdio [--legacy reject|allow]',
  );
  process.exit(message ? 2 : 0);
}

function parseArgs(argv) {
  const o = { host: '127.0.0.1', port: 0, legacy: 'allow' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    if (a === '--http' || a === '--stdio') {
      if (o.mode) usage('give one of --http and --stdio');
      o.mode = a.slice(2);
    } else if (a === '--host') o.host = value();
    else if (a === '--port') o.port = Number(value());
    else if (a === '--legacy') o.legacy = value();
    else if (a === '-h' || a === '--help') usage();
    else usage(`unknown argument "${a}"`);
  }
  if (!o.mode) usage('give one of --http and --stdio');
  if (!['allow', 'reject', 'stateless'].includes(o.legacy)) usage(`--legacy ${o.legacy}: expected reject, allow or stateless`);
  if (o.mode === 'stdio' && o.legacy === 'stateless') usage('--legacy stateless is for --http');
  if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) usage('--port needs 0..65535');
  return o;
}

// ---- state shared by every server instance of this process -------------------------------------

const state = {
  dynamicTool: false,
  versions: new Map([['test://watched', 1]]),
};
// requestState is minted and checked here, whichever instance (one per HTTP request) sees it.
const stateCodec = createRequestStateCodec({
  key: randomBytes(32),
  ttlSeconds: 600,
  bind: (ctx) => `${ctx.mcpReq.method}`,
});
// Who hears a change: the 2026 listen streams (through notify()) and every live 2025 instance.
const listeners = {
  modern: [], // ServerNotifier objects (createMcpHandler(...).notify)
  legacy: new Set(), // { mcp, subscriptions: Set<uri> }
  stdio: new Set(), // McpServer instances served by serveStdio (either era; the SDK filters)
};

function notifyListChanged(list) {
  for (const n of listeners.modern) n[`${list}Changed`]();
  for (const l of [...listeners.legacy, ...[...listeners.stdio].map((mcp) => ({ mcp }))]) {
    const s = l.mcp.server;
    const send = { tools: () => s.sendToolListChanged(), prompts: () => s.sendPromptListChanged(), resources: () => s.sendResourceListChanged() }[list];
    send().catch(() => {});
  }
}

function notifyResourceUpdated(uri) {
  for (const n of listeners.modern) n.resourceUpdated(uri);
  for (const l of listeners.legacy) if (l.subscriptions.has(uri)) l.mcp.server.sendResourceUpdated({ uri }).catch(() => {});
  for (const mcp of listeners.stdio) {
    const subs = mcp.legacySubscriptions;
    // A modern stdio connection filters by its listen subscriptions; a legacy one by resources/subscribe.
    if (subs === undefined || subs.has(uri)) mcp.server.sendResourceUpdated({ uri }).catch(() => {});
  }
}

// ---- the server definition ---------------------------------------------------------------------

const obj = (properties = {}, required = []) => fromJsonSchema({ type: 'object', properties, ...(required.length && { required }) });

function report(tool, era, args, ctx, extra) {
  const env = ctx.mcpReq.envelope ?? {};
  const r = {
    tool,
    era,
    arguments: args ?? {},
    ...(env['io.modelcontextprotocol/protocolVersion'] !== undefined && { protocolVersion: env['io.modelcontextprotocol/protocolVersion'] }),
    ...(env['io.modelcontextprotocol/clientInfo'] !== undefined && { clientInfo: env['io.modelcontextprotocol/clientInfo'] }),
    ...(env['io.modelcontextprotocol/clientCapabilities'] !== undefined && {
      clientCapabilities: env['io.modelcontextprotocol/clientCapabilities'],
    }),
    ...(env['io.modelcontextprotocol/logLevel'] !== undefined && { logLevel: env['io.modelcontextprotocol/logLevel'] }),
    ...(ctx.mcpReq._meta?.progressToken !== undefined && { progressToken: ctx.mcpReq._meta.progressToken }),
    ...extra,
  };
  return { content: [{ type: 'text', text: JSON.stringify(r) }], structuredContent: r };
}

function makeServer(era) {
  const mcp = new McpServer(
    { name: 'mcp-mqtt-bridge-sdk2-server', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        prompts: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        logging: {},
      },
      instructions: 'Test server of mcp-mqtt-bridge (SDK v2).',
      requestState: { verify: stateCodec.verify },
    },
  );

  mcp.registerTool('echo', { description: 'Echoes message', inputSchema: obj({ message: { type: 'string' } }, ['message']) }, async (args, ctx) =>
    report('echo', era, args, ctx, { message: args.message }),
  );

  mcp.registerTool(
    'progress',
    {
      description: 'Sends progress and log notifications',
      inputSchema: obj({ steps: { type: 'integer', minimum: 0, maximum: 100 }, delayMs: { type: 'integer', minimum: 0 } }),
    },
    async (args, ctx) => {
      const steps = args.steps ?? 3;
      const token = ctx.mcpReq._meta?.progressToken;
      let progressSent = 0;
      let logsSent = 0;
      for (let i = 1; i <= steps; i++) {
        await sleep(args.delayMs ?? 20, ctx.mcpReq.signal);
        if (token !== undefined) {
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps, message: `step ${i}` } });
          progressSent++;
        }
        await ctx.mcpReq.log('info', `progress step ${i}`, 'sdk2-server');
        logsSent++;
      }
      // Let a transport in between deliver the notifications before the answer (see README).
      await sleep(50, ctx.mcpReq.signal);
      return report('progress', era, args, ctx, { progressSent, logsAttempted: logsSent });
    },
  );

  mcp.registerTool(
    'ask_elicitation',
    { description: 'Asks the user for a name (elicitation)', inputSchema: obj({ message: { type: 'string' } }) },
    async (args, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'answer');
      if (answer.kind !== 'elicit') {
        return inputRequired({
          inputRequests: {
            answer: inputRequired.elicit({
              message: args.message ?? 'What is your name?',
              requestedSchema: { type: 'object', properties: { name: { type: 'string', title: 'Name' } }, required: ['name'] },
            }),
          },
        });
      }
      return report('ask_elicitation', era, args, ctx, {
        answer: { action: answer.action, ...(answer.content !== undefined && { content: answer.content }) },
      });
    },
  );

  mcp.registerTool(
    'ask_sampling',
    { description: 'Asks the client for two completions in sequence (sampling)', inputSchema: obj({ prompt: { type: 'string' } }) },
    async (args, ctx) => {
      const prompt = args.prompt ?? 'Say something';
      const ask = (key, n) =>
        inputRequired.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: `${prompt} (${n} of 2)` } }],
          maxTokens: 50,
        });
      const carried = ctx.mcpReq.requestState(); // the verified payload, or undefined on round 1
      const second = inputResponse(ctx.mcpReq.inputResponses, 'second');
      if (carried?.first !== undefined && second.kind === 'sampling') {
        return report('ask_sampling', era, args, ctx, { first: carried.first, second: second.result, rounds: 3 });
      }
      const first = inputResponse(ctx.mcpReq.inputResponses, 'first');
      if (first.kind === 'sampling') {
        return inputRequired({
          inputRequests: { second: ask('second', 2) },
          requestState: await stateCodec.mint({ first: first.result }, ctx),
        });
      }
      return inputRequired({ inputRequests: { first: ask('first', 1) } });
    },
  );

  mcp.registerTool('list_roots', { description: "Lists the client's roots" }, async (ctx) => {
    const roots = inputResponse(ctx.mcpReq.inputResponses, 'roots');
    if (roots.kind !== 'roots') return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
    return report('list_roots', era, {}, ctx, { roots: roots.roots });
  });

  mcp.registerTool(
    'trigger_list_changed',
    { description: 'Sends a list_changed notification', inputSchema: obj({ list: { type: 'string', enum: ['tools', 'prompts', 'resources'] } }) },
    async (args, ctx) => {
      const list = args.list ?? 'tools';
      if (list === 'tools') state.dynamicTool = !state.dynamicTool;
      notifyListChanged(list);
      return report('trigger_list_changed', era, args, ctx, { list, dynamicTool: state.dynamicTool });
    },
  );

  mcp.registerTool(
    'update_resource',
    { description: 'Changes a resource and notifies its subscribers', inputSchema: obj({ uri: { type: 'string' } }) },
    async (args, ctx) => {
      const uri = args.uri ?? 'test://watched';
      const version = (state.versions.get(uri) ?? 0) + 1;
      state.versions.set(uri, version);
      notifyResourceUpdated(uri);
      return report('update_resource', era, args, ctx, { uri, version });
    },
  );

  mcp.registerTool(
    'sleep',
    { description: 'Answers after ms milliseconds unless cancelled', inputSchema: obj({ ms: { type: 'integer', minimum: 0 } }) },
    async (args, ctx) => {
      await sleep(args.ms ?? 1000, ctx.mcpReq.signal);
      return report('sleep', era, args, ctx, { cancelled: ctx.mcpReq.signal.aborted });
    },
  );

  const dynamic = mcp.registerTool('dynamic_tool', { description: 'Present while toggled on' }, async (ctx) =>
    report('dynamic_tool', era, {}, ctx, {}),
  );
  // Listed and callable only while trigger_list_changed has toggled it on; read at request time,
  // so long-lived instances (2025 sessions, stdio connections) see the change as well.
  Object.defineProperty(dynamic, 'enabled', { get: () => state.dynamicTool, set: () => {}, configurable: true });

  mcp.registerResource('static', 'test://static', { mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'static' }],
  }));
  mcp.registerResource('watched', 'test://watched', { mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: `version ${state.versions.get('test://watched')}` }],
  }));

  mcp.registerPrompt(
    'greeting',
    { description: 'A greeting', argsSchema: obj({ name: { type: 'string' } }, ['name']) },
    async (args) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${args.name}!` } }] }),
  );

  if (era === 'legacy') {
    // 2025 sessions subscribe per resource; 2026 clients use subscriptions/listen instead.
    const subscriptions = new Set();
    mcp.legacySubscriptions = subscriptions;
    mcp.server.setRequestHandler('resources/subscribe', async (request) => {
      subscriptions.add(request.params.uri);
      return {};
    });
    mcp.server.setRequestHandler('resources/unsubscribe', async (request) => {
      subscriptions.delete(request.params.uri);
      return {};
    });
  }
  return mcp;
}

// ---- HTTP ----------------------------------------------------------------------------------------

function jsonError(status, code, message) {
  return Response.json({ jsonrpc: '2.0', id: null, error: { code, message } }, { status });
}

async function runHttp(o) {
  const onerror = (e) => log(e.message);
  const handler = createMcpHandler(({ era }) => makeServer(era), {
    ...(o.legacy !== 'stateless' && { legacy: 'reject' }),
    onerror,
  });
  listeners.modern.push(handler.notify);

  const sessions = new Map(); // Mcp-Session-Id → { transport, mcp, subscriptions }
  async function legacySession(request) {
    const id = request.headers.get('mcp-session-id');
    if (id !== null) {
      const s = sessions.get(id);
      if (s === undefined) return jsonError(404, -32001, 'Session not found');
      return s.transport.handleRequest(request);
    }
    const mcp = makeServer('legacy');
    const entry = { mcp, subscriptions: mcp.legacySubscriptions };
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => {
        sessions.set(sid, { transport, ...entry });
        listeners.legacy.add(entry);
      },
      onsessionclosed: (sid) => {
        sessions.delete(sid);
        listeners.legacy.delete(entry);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
      listeners.legacy.delete(entry);
    };
    await mcp.connect(transport);
    const response = await transport.handleRequest(request);
    if (transport.sessionId === undefined) await mcp.close().catch(() => {}); // not an initialize
    return response;
  }

  const http = createFetchServer(
    async (request) => {
      const rejected =
        hostHeaderValidationResponse(request, localhostAllowedHostnames()) ?? originValidationResponse(request, localhostAllowedOrigins());
      if (rejected) return rejected;
      if (new URL(request.url).pathname !== '/mcp') return jsonError(404, -32000, 'Not found: only /mcp is served');
      if (o.legacy === 'allow' && (await isLegacyRequest(request))) return legacySession(request);
      return handler.fetch(request);
    },
    { onError: onerror },
  );
  const port = await listen(http, o.host, o.port);
  const shown = o.host.includes(':') ? `[${o.host}]` : o.host;
  process.stdout.write(`MCP_FIXTURE_URL=http://${shown}:${port}/mcp\n`);
  const v = await versions();
  log(`listening on ${shown}:${port} (server ${v.server}, legacy ${o.legacy})`);
  return async () => {
    await handler.close().catch(() => {});
    for (const s of sessions.values()) await s.transport.close().catch(() => {});
    http.closeAllConnections?.();
    await new Promise((resolve) => http.close(resolve));
  };
}

// ---- stdio ---------------------------------------------------------------------------------------

async function runStdio(o) {
  const handle = await serveStdio(
    ({ era }) => {
      const mcp = makeServer(era);
      listeners.stdio.add(mcp);
      mcp.server.onclose = () => listeners.stdio.delete(mcp);
      return mcp;
    },
    { legacy: o.legacy === 'reject' ? 'reject' : 'serve', onerror: (e) => log(e.message) },
  );
  process.stdin.on('end', () => void handle.close().then(() => process.exit(0)));
  return () => handle.close();
}

const o = parseArgs(process.argv.slice(2));
const close = o.mode === 'http' ? await runHttp(o) : await runStdio(o);
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    void Promise.resolve(close())
      .catch(() => {})
      .then(() => process.exit(0));
  });
}
