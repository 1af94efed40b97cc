// The container tier's replicas: docker/compose.replicas.yaml run with podman from its own
// definitions (scripts/compose-podman.py) — Mosquitto, the egress publishing server-everything,
// two bridge replicas sharing docker/replica.secret, and HAProxy (docker/haproxy.cfg,
// round-robin, no stickiness) — used the way a user uses them: the official MCP SDK client on
// the host holds one 2025 session through HAProxy's published port, its requests spread over both
// replicas, and those that reach the replica which does not hold the session are relayed to it
// through the broker. The replicas' own metrics say that they were.
//
// Run by `scripts/container.sh test` (part of scripts/test.sh; `scripts/container.sh test
// replicas` runs this file alone), which builds the images first and passes: CONTAINERS_CONF,
// MCPMQTT_CONTAINER_PROJECT (the compose project, torn down before and after),
// MCPMQTT_CONTAINER_COMPOSE (the compose files) and BRIDGE_PORT set but empty (any free port).
// The secret is made as docs/deploy/container.md says when the tree has none, and removed after.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const project = process.env.MCPMQTT_CONTAINER_PROJECT;
if (!project || process.env.BRIDGE_PORT !== '' || !process.env.CONTAINERS_CONF ||
    !process.env.MCPMQTT_CONTAINER_COMPOSE) {
  console.error('replicas.test.mjs: run it with scripts/container.sh test replicas');
  process.exit(2);
}
const haproxy = `${project}-haproxy-1`;
const replicas = [`${project}-replica1-1`, `${project}-replica2-1`];
const egress = `${project}-bridge-1`;
const broker = `${project}-mosquitto-1`;
const secret = join(root, 'docker/replica.secret');

// ---- helpers -------------------------------------------------------------------------------------

// Runs a program to its end (never through a shell); resolves with its exit code and output.
function run(file, args, { timeoutMs = 60_000 } = {}) {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, stdout, stderr, timedOut: Boolean(error?.killed) });
    });
  });
}
const podman = (...args) => run('podman', args);
const composeFiles = process.env.MCPMQTT_CONTAINER_COMPOSE.split('\n').filter(Boolean)
  .flatMap((f) => ['-f', f]);
const compose = (...args) =>
  run('/usr/bin/python3', [join(root, 'scripts/compose-podman.py'), ...composeFiles, '-p', project, ...args], {
    timeoutMs: 300_000,
  });
const show = (r) => `exit ${r.code}${r.timedOut ? ' (timed out)' : ''}\n${r.stdout}${r.stderr}`;

// Checks `probe` until it returns something other than undefined, or fails after `ms` with what
// the last probe saw. The pause paces the probes; nothing waits on time itself.
async function waitFor(what, ms, probe) {
  const deadline = Date.now() + ms;
  let last = '';
  for (;;) {
    const { value, seen } = await probe();
    if (value !== undefined) return value;
    last = seen;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms} ms; last seen: ${last}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

// A replica's /metrics, read inside its container (only HAProxy is published) with bash's
// /dev/tcp, as its health check reads /readyz.
async function metrics(container) {
  const r = await podman('exec', container, 'bash', '-c',
    'exec 3<>/dev/tcp/127.0.0.1/8080 && ' +
    'printf "GET /metrics HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n" >&3 && cat <&3');
  assert.equal(r.code, 0, `/metrics of ${container}: ${show(r)}`);
  assert.match(r.stdout, /^HTTP\/1\.1 200/, `/metrics of ${container}`);
  return r.stdout;
}
// One series' value (0 when the replica has not counted it yet).
function series(text, nameAndLabels) {
  const line = text.split(/\r?\n/).find((l) => l.startsWith(`${nameAndLabels} `));
  return line ? Number(line.slice(nameAndLabels.length + 1)) : 0;
}
const sentAnswered = 'mcpmqtt_relay_requests_total{role="sent",outcome="answered"}';
const servedServed = 'mcpmqtt_relay_requests_total{role="served",outcome="served"}';

let failed = false;
function step(name, fn, timeout = 120_000) {
  test(name, { timeout }, async () => {
    try {
      await fn();
    } catch (e) {
      failed = true;
      throw e;
    }
  });
}

// ---- the services --------------------------------------------------------------------------------

let madeSecret = false;

// The egress's npm cache (its named volume) is kept from one run to the next: container.test.mjs
// fetches server-everything into a fresh volume already, and this file's session is then a
// few seconds instead of some twenty.
async function teardown() {
  const down = await compose('down');
  assert.equal(down.code, 0, `compose-podman down: ${show(down)}`);
}

before(async () => {
  await teardown(); // whatever an interrupted run left
  if (!existsSync(secret)) {
    // As docs/deploy/container.md tells users to make it.
    const made = await run('bash', ['-c', 'umask 022 && head -c 48 /dev/urandom | base64 > "$1"', 'secret', secret]);
    assert.equal(made.code, 0, show(made));
    madeSecret = true;
  }
  const up = await compose('up');
  if (up.code !== 0) {
    failed = true;
    assert.fail(`compose-podman up: ${show(up)}`);
  }
});

after(async () => {
  try {
    if (failed) {
      for (const c of [broker, egress, ...replicas, haproxy]) {
        const logs = await podman('logs', '--tail', '60', c);
        console.error(`---- podman logs --tail 60 ${c}\n${logs.stdout}${logs.stderr}`);
      }
    }
    await teardown();
  } finally {
    if (madeSecret) rmSync(secret, { force: true });
  }
});

// ---- the tests -----------------------------------------------------------------------------------

let port;
step('only HAProxy is published, on the host loopback; the replicas, the egress and the broker are not', async () => {
  const r = await podman('ps', '--filter', `label=com.docker.compose.project=${project}`, '--format', 'json');
  assert.equal(r.code, 0, show(r));
  const published = Object.fromEntries(JSON.parse(r.stdout).map((c) => [c.Names[0],
    (c.Ports ?? []).map((p) => `${p.host_ip}:${p.host_port}->${p.container_port}/${p.protocol}`)]));
  assert.deepEqual(Object.keys(published).sort(), [broker, egress, haproxy, ...replicas].sort(), r.stdout);
  assert.equal(published[haproxy].length, 1, JSON.stringify(published));
  const m = published[haproxy][0].match(/^127\.0\.0\.1:(\d+)->8080\/tcp$/);
  assert.ok(m, JSON.stringify(published));
  port = Number(m[1]);
  for (const c of [...replicas, egress, broker]) assert.deepEqual(published[c], [], `${c} is published`);
});

step('through HAProxy: ready, and both replicas see demo/everything, which the egress publishes', async () => {
  assert.ok(port, 'no published port (see the test before)');
  // Each new session opens MQTT connections of its own, from a replica and from the egress, and
  // looks the broker's name up first. On the project's machines (podman in a gVisor sandbox) a
  // container on a compose network sometimes sends no UDP at all, so gets no lookup answered,
  // for up to a minute after containers start on that network (TCP unaffected), and a session
  // whose connection waits on a lookup fails after mqtt.connect_timeout_ms (10 s). Not the
  // files' fault: wait for lookups to answer in those containers (each try at most 4 s: 1 s per
  // server and name, no retry), and say how long that took.
  const start = Date.now();
  const waited = await Promise.all([...replicas, egress].map(async (c) => {
    await waitFor(`a lookup of mosquitto in ${c}`, 120_000, async () => {
      const r = await podman('exec', '--env', 'RES_OPTIONS=timeout:1 attempts:1', c, 'getent', 'ahostsv4', 'mosquitto');
      return { value: r.code === 0 ? true : undefined, seen: show(r) };
    });
    return `${c.slice(project.length + 1)} after ${Date.now() - start} ms`;
  }));
  console.log(`# lookups answered: ${waited.join(', ')}`);
  // HAProxy starts before the replicas and puts each in rotation once its name resolves and it
  // answers: wait until both have answered GET /servers with demo/everything, as HAProxy's
  // access log tells (`mcp replicas/replica1 … 200 … "GET /servers …"`).
  const answered = new Set();
  await waitFor('both replicas answering GET /servers with demo/everything', 60_000, async () => {
    let seen = '';
    try {
      const r = await fetch(`http://127.0.0.1:${port}/servers`);
      seen = `${r.status} ${await r.text()}`;
      if (r.status === 200 && seen.includes('"demo/everything"')) {
        const logs = await podman('logs', haproxy);
        for (const m of logs.stdout.matchAll(/ mcp replicas\/(replica\d) \S+ 200 .*"GET \/servers /g)) answered.add(m[1]);
      }
    } catch (e) {
      seen = String(e);
    }
    return { value: answered.size === 2 ? true : undefined, seen: `${seen}; answered so far: ${[...answered]}` };
  });
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
  assert.equal(ready.status, 200, await ready.text());
});

let sessionId;
let protocolVersion;
step('an MCP SDK client through HAProxy: one 2025 session over both replicas (initialize, tools/list, tools/call, DELETE)', async () => {
  assert.ok(port, 'no published port');
  const message = `hello through the balancer ${randomUUID()}`;
  const script = {
    steps: [
      { op: 'listTools', label: 'tools/list' },
      { op: 'callTool', label: 'echo', name: 'echo', arguments: { message } },
      { op: 'callTool', label: 'get-sum', name: 'get-sum', arguments: { a: 20, b: 22 } },
      { op: 'ping', label: 'ping' },
      { op: 'terminateSession', label: 'DELETE' },
    ],
  };
  const start = Date.now();
  // The first session waits for the egress's npx to start server-everything (and to fetch it,
  // on a machine that never ran this file).
  const r = await run(process.execPath, [join(root, 'tests/node/sdk-client.mjs'), '--url', `http://127.0.0.1:${port}/mcp`,
    '--timeout-ms', '120000', '--script-json', JSON.stringify(script)], { timeoutMs: 300_000 });
  const lines = r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(r.code, 0, show(r));
  const connected = lines.find((l) => l.type === 'connected');
  assert.equal(connected?.serverInfo?.name, 'mcp-servers/everything', show(r));
  sessionId = connected?.sessionId;
  protocolVersion = connected?.protocolVersion;
  assert.ok(sessionId, `no Mcp-Session-Id: ${show(r)}`);
  const stepResult = (label) => lines.find((l) => l.type === 'step' && l.label === label);
  const tools = stepResult('tools/list')?.result?.tools?.map((t) => t.name) ?? [];
  assert.ok(tools.includes('echo') && tools.includes('get-sum'), `tools: ${tools.join(', ')}`);
  assert.deepEqual(stepResult('echo')?.result?.content, [{ type: 'text', text: `Echo: ${message}` }]);
  assert.match(stepResult('get-sum')?.result?.content?.[0]?.text ?? '', /\b42\b/);
  assert.equal(stepResult('DELETE')?.ok, true, show(r));
  console.log(`# session (npx starting server-everything included): ${Date.now() - start} ms`);
  // The replica that did not initialize the session relayed some of its requests to the one
  // that did, and that one served them.
  const [m1, m2] = await Promise.all(replicas.map(metrics));
  const counts = [m1, m2].map((m) => ({ sent: series(m, sentAnswered), served: series(m, servedServed) }));
  const seen = JSON.stringify(counts);
  assert.ok(counts.some((c) => c.sent > 0), `no replica relayed a request: ${seen}`);
  assert.ok(counts.some((c) => c.served > 0), `no replica served a relayed request: ${seen}`);
  assert.ok(counts.some((c) => c.sent > 0 && c.served === 0) && counts.some((c) => c.served > 0 && c.sent === 0),
    `one replica relays, the other serves: ${seen}`);
}, 330_000);

step('after DELETE the session is gone on both replicas (404 twice in a row, round-robin)', async () => {
  assert.ok(sessionId, 'no session (see the test before)');
  for (let i = 0; i < 2; ++i) {
    const r = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'Mcp-Session-Id': sessionId,
        'MCP-Protocol-Version': protocolVersion,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    const text = await r.text();
    assert.equal(r.status, 404, `request ${i + 1}: ${r.status} ${text}`);
  }
});
