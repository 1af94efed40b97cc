// The soak: mixed MCP traffic through real mcp-mqtt-bridge processes and a real
// Mosquitto on loopback, with faults injected on a schedule, accounting for every request.
// Run it through scripts/soak.sh, which passes the paths below.
//
//   node soak.mjs --bridge EXE --server EXE --mosquitto EXE --seconds N [--workdir DIR]
//
// Topology: one egress process publishes the C++ test MCP server (tests/servers) as test/soak;
// one HTTP ingress process serves it over Streamable HTTP; stdio ingress processes
// (`mcp-mqtt-bridge stdio`) are started per stdio client. The clients are the official
// TypeScript SDK's Client over StreamableHTTPClientTransport and StdioClientTransport (v1, the
// 2025 revisions), and the v2 Client pinned to revision 2026-07-28 over HTTP.
//
// Traffic (each worker in a loop): a session opens, makes 5-20 requests chosen at random —
// tools/call echo, tools/call sleep with progress, resources/subscribe then a tool that makes
// the server send notifications/resources/updated, resources/unsubscribe, ping — and closes
// (HTTP: DELETE, or abandoned one time in five). The 2026-07-28 worker has no session: it
// calls echo and sleep with progress, and opens subscriptions/listen for a resource and a
// list change, makes the server send both, waits for them on the listen's stream, and
// closes the listen.
//
// Faults, in turn, every `--fault-every-s` seconds (default 6): the broker SIGKILLed and
// restarted after 1 s (empty), an egress child SIGKILLed, the HTTP ingress SIGKILLed and
// started again, a stdio ingress process SIGKILLed.
//
// Accounting: every request ends in exactly one of
//   result           a JSON-RPC result
//   error <code>     a JSON-RPC error (from the bridge or the server)
//   transport <why>  the client saw its connection fail at once (refused, reset, closed, 404 for
//                    a session that ended): an immediate, definite failure
//   unanswered       nothing within the client's own timeout (20 s): must be 0
// The bridges' timeouts are 10 s, so a request lost inside them shows as error -32001.
// Memory: the egress process lives through the whole run (the HTTP ingress is restarted by the
// faults): its RSS after warm-up against its RSS at the end, once traffic stopped and every
// session closed; its open descriptors at the end against a fresh egress of the same
// configuration at rest. Exits 1 when anything is unanswered, a bridge died, children are left,
// or drift passes the bounds (RSS +32 MiB, descriptors +4).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, StdioClientTransport, StreamableHTTPClientTransport, types } from './sdk.mjs';
import { client as sdk2 } from './sdk2.mjs';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
    return acc;
  }, []),
);
const seconds = Number(args.seconds ?? 600);
const faultEveryS = Number(args['fault-every-s'] ?? 6);
const bridgeExe = args.bridge;
const serverExe = args.server;
const mosquittoExe = args.mosquitto ?? '/usr/sbin/mosquitto';
const workdir = args.workdir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'mcpmqtt-soak-'));
fs.mkdirSync(workdir, { recursive: true });
const HTTP_WORKERS = 5;
const STDIO_WORKERS = 2;
const MODERN_WORKERS = 1;
const MODERN = '2026-07-28';
const CLIENT_TIMEOUT_MS = 20000;
const RSS_BOUND_KIB = 32 * 1024;
const FD_BOUND = 4;

const log = (...a) => console.error(`[soak ${new Date().toISOString().slice(11, 19)}]`, ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// ---- processes ---------------------------------------------------------------------------

function start(name, argv, extraEnv = {}) {
  const out = fs.openSync(path.join(workdir, `${name}.log`), 'a');
  const p = spawn(argv[0], argv.slice(1), {
    stdio: ['ignore', out, out],
    env: { ...process.env, ...extraEnv },
  });
  p.on('error', (e) => log(`${name}: ${e.message}`));
  return p;
}

function waitExit(p) {
  return new Promise((r) => (p.exitCode !== null || p.signalCode !== null ? r() : p.once('exit', r)));
}

async function waitPort(port, ms = 10000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await new Promise((r) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        r(true);
      });
      s.on('error', () => r(false));
    });
    if (ok) return true;
    await sleep(50);
  }
  return false;
}

async function waitLog(name, needle, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (fs.readFileSync(path.join(workdir, `${name}.log`), 'utf8').includes(needle)) return true;
    await sleep(50);
  }
  return false;
}

const proc = {
  rssKib(pid) {
    try {
      const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
      return m ? Number(m[1]) : 0;
    } catch {
      return 0;
    }
  },
  fds(pid) {
    try {
      return fs.readdirSync(`/proc/${pid}/fd`).length;
    } catch {
      return 0;
    }
  },
  children(pid) {
    const out = [];
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
        const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (Number(rest[1]) === pid) out.push({ pid: Number(d), state: rest[0] });
      } catch {
        // gone meanwhile
      }
    }
    return out;
  },
};

// ---- the world ---------------------------------------------------------------------------

const brokerPort = await freePort();
const httpPort = await freePort();
const brokerUrl = `mqtt://127.0.0.1:${brokerPort}`;
fs.writeFileSync(
  path.join(workdir, 'mosquitto.conf'),
  `listener ${brokerPort} 127.0.0.1\nallow_anonymous true\npersistence false\n`,
);
let broker;
async function startBroker() {
  broker = start('mosquitto', [mosquittoExe, '-c', path.join(workdir, 'mosquitto.conf')]);
  if (!(await waitPort(brokerPort))) throw new Error('mosquitto did not start');
}

const common = {
  // The egress's initialize timeout also ends a session whose client sent nothing after the
  // initialize response (one killed with the ingress before its presence was watched): well
  // within the quiescence wait below.
  timeouts: { default: 10, 'tools/call': 10, initialize: 10 },
  log: { level: 'info' },
};
fs.writeFileSync(
  path.join(workdir, 'egress.json'),
  JSON.stringify({
    ...common,
    mqtt: { url: brokerUrl, reconnect_min_ms: 100, reconnect_max_ms: 1000 },
    http: { enabled: false },
    egress: { max_sessions_per_server: 256, terminate_after_ms: 500, kill_after_ms: 500 },
    mcpServers: { 'test/soak': { command: serverExe } },
  }),
);
fs.writeFileSync(
  path.join(workdir, 'ingress.json'),
  JSON.stringify({
    ...common,
    mqtt: { url: brokerUrl, reconnect_min_ms: 100, reconnect_max_ms: 1000 },
    // Sessions the clients leave behind (HTTP sessions, the 2026-07-28 gateway's pooled MQTT
    // sessions) end well within the quiescence wait below, so that the egress's children can
    // all be gone by then.
    http: { listen: `127.0.0.1:${httpPort}`, limits: { session_idle_timeout_ms: 5000 } },
    ingress: {
      default_server: 'test/soak',
      presence_wait_ms: 3000,
      modern: { idle_timeout_ms: 5000 },
    },
    mcpServers: {},
  }),
);

let egress;
let ingress;
let ingressStarts = 0;
async function startIngress() {
  ingressStarts += 1;
  ingress = start('ingress', [bridgeExe, '--config', path.join(workdir, 'ingress.json')]);
  await waitPort(httpPort);
}

await startBroker();
egress = start('egress', [bridgeExe, '--config', path.join(workdir, 'egress.json')]);
if (!(await waitLog('egress', '[server test/soak] online'))) throw new Error('egress not online');
await startIngress();

// ---- accounting --------------------------------------------------------------------------

const counts = { requests: 0, result: 0, unanswered: 0 };
const errors = new Map(); // kind -> n
const faults = new Map(); // kind -> n
let updates = 0;
let progress = 0;
const listens = { opened: 0, notified: 0, missed: 0 };
let sessionsOpened = 0;
const bump = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);

function classify(e) {
  const msg = String(e?.message ?? e);
  // v2 (2026-07-28): SdkError for what never crossed the wire, ProtocolError for JSON-RPC errors.
  if (e instanceof sdk2.SdkError) {
    if (e.code === sdk2.SdkErrorCode.RequestTimeout) return 'unanswered';
    if (e.code === sdk2.SdkErrorCode.ConnectionClosed) return 'transport connection closed';
  }
  if (e instanceof sdk2.ProtocolError) return `error ${e.code}`;
  if (e instanceof types.McpError && e.code === types.ErrorCode.RequestTimeout && /Request timed out/.test(msg) && !/mcp-mqtt-bridge/.test(msg))
    return 'unanswered';
  if (e instanceof types.McpError) {
    if (e.code === types.ErrorCode.ConnectionClosed) return 'transport connection closed';
    return `error ${e.code}`;
  }
  if (e?.constructor?.name === 'StreamableHTTPError') {
    // An HTTP status, with the JSON-RPC error of its body when it has one.
    const body = msg.indexOf('{');
    let rpc = '';
    try {
      rpc = body >= 0 ? ` (JSON-RPC ${JSON.parse(msg.slice(body)).error.code})` : '';
    } catch {
      rpc = '';
    }
    return `transport HTTP ${e.code}${e.code === 404 ? ' session ended' : ''}${rpc}`;
  }
  if (/fetch failed|ECONNREFUSED|ECONNRESET|socket|terminated|other side closed|aborted/i.test(msg))
    return 'transport connection failed';
  if (/Not connected|closed/i.test(msg)) return 'transport connection closed';
  return `transport other: ${msg.slice(0, 60)}`;
}

// HTTP ingress processes by start number, and those SIGKILLed: a request whose SSE response
// stream the kill cut is seen by the SDK client as a transport error (onerror), but the SDK keeps
// the request pending until its own timeout. Such a request counts as a transport failure, not
// as unanswered: there was no process left to answer it, and the client saw its stream cut.
const killedIngress = new Set();

async function account(fn, kind = 'http') {
  counts.requests += 1;
  const gen = ingressStarts;
  try {
    const r = await fn();
    if (r?.isError) bump(errors, 'tool result isError');
    else counts.result += 1;
    return true;
  } catch (e) {
    let what = classify(e);
    if (what === 'unanswered' && kind === 'http' && killedIngress.has(gen))
      what = 'transport response stream cut by the ingress SIGKILL';
    if (what === 'unanswered') {
      counts.unanswered += 1;
      log('UNANSWERED:', e.message);
    } else bump(errors, what);
    return !what.startsWith('transport');
  }
}

// ---- workers -----------------------------------------------------------------------------

let running = true;
const stdioPids = new Set();

async function session(kind) {
  const client = new Client({ name: `soak-${kind}`, version: '1' }, { capabilities: {} });
  client.onerror = () => {};
  client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, () => {
    updates += 1;
  });
  let transport;
  if (kind === 'http') {
    transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${httpPort}/mcp`));
  } else {
    transport = new StdioClientTransport({
      command: bridgeExe,
      args: ['stdio', '--broker', brokerUrl, '--server', 'test/soak', '--presence-wait-ms', '3000'],
      stderr: 'ignore',
    });
  }
  // initialize counts as a request too.
  const connected = await account(async () => {
    await client.connect(transport, { timeout: CLIENT_TIMEOUT_MS });
    return {};
  }, kind);
  if (!connected) {
    await client.close().catch(() => {});
    return;
  }
  sessionsOpened += 1;
  if (kind === 'stdio' && transport.pid) stdioPids.add(transport.pid);
  const opts = { timeout: CLIENT_TIMEOUT_MS };
  const uri = `soak://r/${Math.floor(Math.random() * 1e9)}`;
  const n = 5 + Math.floor(Math.random() * 16);
  for (let i = 0; i < n && running; i += 1) {
    const op = pick(['echo', 'echo', 'sleep', 'sleep', 'update', 'ping']);
    let ok;
    if (op === 'echo') {
      ok = await account(() => client.callTool({ name: 'echo', arguments: { text: `m${i}` } }, undefined, opts), kind);
    } else if (op === 'sleep') {
      ok = await account(
        () =>
          client.callTool({ name: 'sleep', arguments: { ms: 50 + Math.floor(Math.random() * 400) } }, undefined, {
            ...opts,
            onprogress: () => {
              progress += 1;
            },
          }),
        kind,
      );
    } else if (op === 'update') {
      ok = await account(() => client.subscribeResource({ uri }, opts), kind);
      if (ok)
        ok = await account(
          () => client.callTool({ name: 'notify', arguments: { method: 'notifications/resources/updated', uri } }, undefined, opts),
          kind,
        );
      if (ok) ok = await account(() => client.unsubscribeResource({ uri }, opts), kind);
    } else {
      ok = await account(() => client.ping(opts), kind);
    }
    if (!ok) break; // the session is gone: a new one
  }
  if (kind === 'http' && Math.random() < 0.8) await transport.terminateSession().catch(() => {});
  if (kind === 'stdio' && transport.pid) stdioPids.delete(transport.pid);
  await client.close().catch(() => {});
}

// A 2026-07-28 client: no session, every request stands alone (its _meta envelope); change
// notifications come only on subscriptions/listen streams.
async function modernClient() {
  const client = new sdk2.Client(
    { name: 'soak-modern', version: '1' },
    { capabilities: {}, versionNegotiation: { mode: { pin: MODERN } } },
  );
  client.onerror = () => {};
  const seen = new Set(); // what the open listen delivered: "updated <uri>", "tools"
  const waiters = new Set();
  const note = (what) => {
    seen.add(what);
    for (const w of waiters) w();
  };
  client.setNotificationHandler('notifications/resources/updated', (n) => note(`updated ${n.params.uri}`));
  client.setNotificationHandler('notifications/tools/list_changed', () => note('tools'));
  const waitFor = (what, ms) =>
    new Promise((resolve) => {
      const done = (ok) => {
        waiters.delete(check);
        clearTimeout(timer);
        resolve(ok);
      };
      const check = () => seen.has(what) && done(true);
      const timer = setTimeout(() => done(false), ms);
      waiters.add(check);
      check();
    });
  const transport = new sdk2.StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${httpPort}/mcp`));
  // server/discover counts as a request.
  const connected = await account(async () => {
    await client.connect(transport, { timeout: CLIENT_TIMEOUT_MS });
    return {};
  });
  if (!connected) {
    await client.close().catch(() => {});
    return;
  }
  const opts = { timeout: CLIENT_TIMEOUT_MS };
  const n = 5 + Math.floor(Math.random() * 16);
  for (let i = 0; i < n && running; i += 1) {
    const op = pick(['echo', 'sleep', 'listen']);
    let ok;
    if (op === 'echo') {
      ok = await account(() => client.callTool({ name: 'echo', arguments: { text: `m${i}` } }, opts));
    } else if (op === 'sleep') {
      ok = await account(() =>
        client.callTool(
          { name: 'sleep', arguments: { ms: 50 + Math.floor(Math.random() * 400) } },
          { ...opts, onprogress: () => (progress += 1) },
        ),
      );
    } else {
      const uri = `soak://l/${Math.floor(Math.random() * 1e9)}`;
      seen.clear();
      let sub;
      ok = await account(async () => {
        sub = await client.listen({ resourceSubscriptions: [uri], toolsListChanged: true }, opts);
        return {};
      });
      if (!ok) break;
      listens.opened += 1;
      for (const [method, what] of [
        ['notifications/resources/updated', `updated ${uri}`],
        ['notifications/tools/list_changed', 'tools'],
      ]) {
        ok = await account(() => client.callTool({ name: 'notify', arguments: { method, uri } }, opts));
        if (!ok) break;
        // The notification travels on the listen's own stream; a fault may cut that stream.
        if (await waitFor(what, 5000)) listens.notified += 1;
        else listens.missed += 1;
      }
      await sub.close().catch(() => {});
    }
    if (!ok) break;
  }
  await client.close().catch(() => {});
}

async function worker(kind) {
  while (running) {
    await (kind === 'modern' ? modernClient() : session(kind)).catch((e) => log(`worker ${kind}: ${e.message}`));
    await sleep(10);
  }
}

// ---- faults ------------------------------------------------------------------------------

const faultKinds = ['broker SIGKILL + restart', 'egress child SIGKILL', 'HTTP ingress SIGKILL + restart', 'stdio ingress SIGKILL'];
let faultIndex = 0;
async function injectFault() {
  const kind = faultKinds[faultIndex % faultKinds.length];
  faultIndex += 1;
  if (kind.startsWith('broker')) {
    broker.kill('SIGKILL');
    await waitExit(broker);
    await sleep(1000);
    await startBroker();
  } else if (kind.startsWith('egress child')) {
    const kids = proc.children(egress.pid).filter((c) => c.state !== 'Z');
    if (!kids.length) return;
    process.kill(pick(kids).pid, 'SIGKILL');
  } else if (kind.startsWith('HTTP ingress')) {
    killedIngress.add(ingressStarts);
    ingress.kill('SIGKILL');
    await waitExit(ingress);
    await startIngress();
  } else {
    const pids = [...stdioPids];
    if (!pids.length) return;
    try {
      process.kill(pick(pids), 'SIGKILL');
    } catch {
      return;
    }
  }
  bump(faults, kind);
}

// ---- run ---------------------------------------------------------------------------------

const started = Date.now();
const workers = [];
for (let i = 0; i < HTTP_WORKERS; i += 1) workers.push(worker('http'));
for (let i = 0; i < STDIO_WORKERS; i += 1) workers.push(worker('stdio'));
for (let i = 0; i < MODERN_WORKERS; i += 1) workers.push(worker('modern'));

// Warm-up: traffic without faults, then the reference levels.
const warmupMs = Math.min(20000, Math.max(5000, seconds * 100));
await sleep(warmupMs);
// Descriptors follow the sessions open, so they are compared at rest (see the end).
const warm = { egressRss: proc.rssKib(egress.pid) };
log(`warm-up done after ${warmupMs} ms: egress RSS ${warm.egressRss} KiB`);

const endAt = started + seconds * 1000;
while (Date.now() < endAt) {
  await sleep(Math.min(faultEveryS * 1000, Math.max(0, endAt - Date.now())));
  if (Date.now() < endAt) await injectFault().catch((e) => log(`fault: ${e.message}`));
}
running = false;
await Promise.all(workers);

// Quiescence: every session closed; the egress's children and descriptors come back down.
const quietDeadline = Date.now() + 30000;
let egressKids = proc.children(egress.pid);
while (Date.now() < quietDeadline) {
  egressKids = proc.children(egress.pid);
  if (egressKids.length === 0) break;
  await sleep(200);
}
await sleep(500);
const end = {
  egressRss: proc.rssKib(egress.pid),
  egressFds: proc.fds(egress.pid),
  egressChildren: egressKids.length,
  egressZombies: egressKids.filter((c) => c.state === 'Z').length,
  ingressAlive: ingress.exitCode === null && ingress.signalCode === null,
  egressAlive: egress.exitCode === null && egress.signalCode === null,
};

// The egress's descriptors at rest: a fresh egress of the same configuration, with no traffic,
// is the reference (warm-up happened with sessions open, so its count then is not a rest level).
const fresh = start('egress-ref', [bridgeExe, '--config', path.join(workdir, 'egress.json')]);
await waitLog('egress-ref', '[server test/soak] online');
await sleep(300);
const restFds = proc.fds(fresh.pid);
fresh.kill('SIGTERM');
await waitExit(fresh);

const rssDrift = end.egressRss - warm.egressRss;
const fdDrift = end.egressFds - restFds;
const errorTotal = [...errors.values()].reduce((a, b) => a + b, 0);
const rows = [
  ['duration', `${Math.round((Date.now() - started) / 1000)} s (warm-up ${warmupMs / 1000} s)`],
  ['sessions opened', `${sessionsOpened} (HTTP and stdio)`],
  ['requests sent', counts.requests],
  ['  answered with a result', counts.result],
  ['  answered with an error', errorTotal],
  ...[...errors.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => [`    ${k}`, v]),
  ['  unanswered', counts.unanswered],
  ['progress notifications', progress],
  ['resource updates received', updates],
  ['2026-07-28 listens opened', listens.opened],
  ['  notifications received on them / missed', `${listens.notified} / ${listens.missed}`],
  ['faults injected', [...faults.values()].reduce((a, b) => a + b, 0)],
  ...[...faults.entries()].map(([k, v]) => [`  ${k}`, v]),
  ['egress RSS after warm-up / at end', `${warm.egressRss} / ${end.egressRss} KiB (drift ${rssDrift} KiB, bound ${RSS_BOUND_KIB})`],
  ['egress fds at rest: fresh process / at end', `${restFds} / ${end.egressFds} (drift ${fdDrift}, bound ${FD_BOUND})`],
  ['egress children / zombies at end', `${end.egressChildren} / ${end.egressZombies}`],
  ['HTTP ingress starts', ingressStarts],
];
const width = Math.max(...rows.map((r) => String(r[0]).length));
console.log(`| ${'what'.padEnd(width)} | value |`);
console.log(`|${'-'.repeat(width + 2)}|---|`);
for (const [k, v] of rows) console.log(`| ${String(k).padEnd(width)} | ${v} |`);

const failures = [];
if (counts.unanswered) failures.push(`${counts.unanswered} requests unanswered`);
if (counts.requests !== counts.result + errorTotal + counts.unanswered) failures.push('requests do not add up');
if (rssDrift > RSS_BOUND_KIB) failures.push(`egress RSS drift ${rssDrift} KiB > ${RSS_BOUND_KIB}`);
if (fdDrift > FD_BOUND) failures.push(`egress descriptor drift ${fdDrift} > ${FD_BOUND}`);
if (end.egressChildren) failures.push(`${end.egressChildren} egress children left`);
if (!end.egressAlive || !end.ingressAlive) failures.push('a bridge process died');

ingress.kill('SIGTERM');
egress.kill('SIGTERM');
await Promise.all([waitExit(ingress), waitExit(egress)]);
broker.kill('SIGTERM');
await waitExit(broker);
if (failures.length) {
  console.log(`FAIL: ${failures.join('; ')} (logs in ${workdir})`);
  process.exit(1);
}
console.log(`PASS (logs in ${workdir})`);
process.exit(0);
