// The container tier: the image docker/Dockerfile builds and the broker of docker/compose.yaml,
// run with podman from compose.yaml's own definitions (scripts/compose-podman.py), used the way
// a user uses them: the official MCP SDK client on the host reaches server-everything, which
// the bridge starts with npx inside its container, through the port compose publishes on
// 127.0.0.1 and the broker; then the user stops the bridge.
//
// Run by `scripts/container.sh test` (part of scripts/test.sh), which builds the images first
// and passes: CONTAINERS_CONF (its podman configuration), MCPMQTT_CONTAINER_PROJECT (the compose
// project to run, torn down before and after) and BRIDGE_PORT set but empty (any free port).
// The tests run in order and share the running services; each says what it found when it fails.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const project = process.env.MCPMQTT_CONTAINER_PROJECT;
if (!project || process.env.BRIDGE_PORT !== '' || !process.env.CONTAINERS_CONF ||
    !process.env.MCPMQTT_CONTAINER_COMPOSE) {
  console.error('container.test.mjs: run it with scripts/container.sh test');
  process.exit(2);
}
const bridgeImage = 'mcp-mqtt-bridge:0.1.0';
const bridge = `${project}-bridge-1`;
const broker = `${project}-mosquitto-1`;
const standalone = `${project}-standalone`;
const healthcheck = '/usr/libexec/mcp-mqtt-bridge/healthcheck';
const uid = '10001';

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
// compose.yaml, and the override container.sh adds on this host (if any).
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

// The processes of a container as the host sees them: pid inside, host pid, state, uids, name.
async function processes(container) {
  const r = await podman('top', container, 'hpid', 'pid', 'ppid', 'comm');
  assert.equal(r.code, 0, `podman top ${container}: ${show(r)}`);
  return r.stdout
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => {
      const [hpid, pid, ppid, ...comm] = line.trim().split(/\s+/);
      let status = '';
      try {
        status = readFileSync(`/proc/${hpid}/status`, 'utf8');
      } catch {
        // gone since podman top looked
      }
      const field = (name) => (status.match(new RegExp(`^${name}:\\s*(.*)$`, 'm')) ?? [])[1] ?? '';
      return {
        hpid,
        pid,
        ppid,
        comm: comm.join(' '),
        state: field('State').slice(0, 1),
        uids: field('Uid').split(/\s+/),
        gids: field('Gid').split(/\s+/),
        capEff: field('CapEff'),
        gone: status === '',
      };
    });
}
const describe = (ps) => ps.map((p) => `${p.pid}/${p.ppid} ${p.state} uid ${p.uids[0]} ${p.comm}`).join('; ');

// The retained presence on the broker: the topics under $mcp-server/presence/ that hold a
// message. Mosquitto sends the retained messages of a SUBSCRIBE's filters in the filters' order,
// so a retained marker on a second filter, sent after the presence, says that all of it came.
async function retainedPresence() {
  const marker = `mcpmqtt-test/${randomUUID()}`;
  const pub = await podman('exec', broker, 'mosquitto_pub', '-h', '127.0.0.1', '-p', '1883',
    '-V', 'mqttv5', '-t', marker, '-r', '-m', 'end');
  assert.equal(pub.code, 0, `mosquitto_pub: ${show(pub)}`);
  const sub = spawn('podman', ['exec', broker, 'mosquitto_sub', '-h', '127.0.0.1', '-p', '1883',
    '-V', 'mqttv5', '-t', '$mcp-server/presence/#', '-t', marker, '-F', '%t']);
  const topics = [];
  let buffer = '';
  let err = '';
  sub.stderr.on('data', (d) => { err += d; });
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`mosquitto_sub: no marker within 20 s; ${err}`)), 20_000);
      sub.on('exit', (code) => reject(new Error(`mosquitto_sub exited ${code}: ${err}`)));
      sub.stdout.on('data', (d) => {
        buffer += d;
        let nl;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const topic = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (topic === marker) {
            clearTimeout(timer);
            resolve();
            return;
          }
          topics.push(topic);
        }
      });
    });
  } finally {
    sub.kill();
    await podman('exec', broker, 'mosquitto_pub', '-h', '127.0.0.1', '-p', '1883', '-V', 'mqttv5',
      '-t', marker, '-r', '-n');
  }
  return topics;
}

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

let port;

async function teardown() {
  await podman('rm', '--force', '--time', '0', standalone);
  const down = await compose('down', '--volumes');
  assert.equal(down.code, 0, `compose-podman down: ${show(down)}`);
}

before(async () => {
  await teardown(); // whatever an interrupted run left
  const up = await compose('up');
  if (up.code !== 0) {
    failed = true;
    assert.fail(`compose-podman up: ${show(up)}`);
  }
});

after(async () => {
  if (failed) {
    for (const c of [broker, bridge, standalone]) {
      const logs = await podman('logs', '--tail', '60', c);
      console.error(`---- podman logs --tail 60 ${c}\n${logs.stdout}${logs.stderr}`);
    }
  }
  await teardown();
});

// ---- the tests -----------------------------------------------------------------------------------

step('the image: a numeric non-root user, its own health check, no compilers, no package lists', async () => {
  const r = await podman('image', 'inspect', bridgeImage);
  assert.equal(r.code, 0, show(r));
  const image = JSON.parse(r.stdout)[0];
  const config = image.Config;
  // Numeric, so that runtimes that require a non-root user (runAsNonRoot) can check it.
  assert.equal(config.User, `${uid}:${uid}`);
  // Kept only in Docker's image format (podman shows it beside Config, Docker inside).
  assert.deepEqual((image.Healthcheck ?? config.Healthcheck)?.Test, ['CMD', healthcheck]);
  assert.ok('8080/tcp' in (config.ExposedPorts ?? {}), `ExposedPorts ${JSON.stringify(config.ExposedPorts)}`);
  // The build stage's compilers stay out of the runtime image, and so do apt's package lists.
  const look = await podman('run', '--rm', '--entrypoint', 'bash', bridgeImage, '-c',
    'for p in gcc g++ c++ cc cmake ninja; do command -v "$p"; done; ls /var/lib/apt/lists | grep -v -x -e lock -e partial; true');
  assert.equal(look.code, 0, show(look));
  assert.equal(look.stdout, '', 'found in the runtime image');
});

step('the daemon starts in its image (every library is there) and its health check passes', async () => {
  const state = await podman('inspect', '--format', '{{.State.Status}}', bridge);
  assert.equal(state.stdout.trim(), 'running', show(state));
  // The compose health check (the image's script), run by podman as Docker would run it.
  await waitFor('podman healthcheck run', 30_000, async () => {
    const h = await podman('healthcheck', 'run', bridge);
    return { value: h.code === 0 ? true : undefined, seen: show(h) };
  });
  const status = await podman('inspect', '--format', '{{.State.Health.Status}}', bridge);
  assert.equal(status.stdout.trim(), 'healthy');
  // Ready: the broker connection is up (the same script on /readyz).
  await waitFor('/readyz', 30_000, async () => {
    const h = await podman('exec', bridge, healthcheck, '/readyz');
    return { value: h.code === 0 ? true : undefined, seen: show(h) };
  });
});

step('every process runs as uid 10001 without capabilities, under an init', async () => {
  const ps = await processes(bridge);
  const seen = describe(ps);
  // init: true puts podman's init at PID 1; it reaps what the MCP servers' children orphan.
  // (podman's init is catatonit, mounted as podman-init; Docker's is tini, as docker-init.)
  assert.match(ps.find((p) => p.pid === '1')?.comm ?? '', /init$/, seen);
  assert.ok(ps.some((p) => p.comm === 'mcp-mqtt-bridge' && p.ppid === '1'), seen);
  for (const p of ps.filter((q) => !q.gone)) {
    assert.deepEqual(p.uids, [uid, uid, uid, uid], `uids of ${p.comm}: ${seen}`);
    assert.deepEqual(p.gids, [uid, uid, uid, uid], `gids of ${p.comm}: ${seen}`);
    assert.equal(p.capEff, '0000000000000000', `effective capabilities of ${p.comm}`);
  }
  // The broker, too, runs as its own user.
  for (const p of await processes(broker)) {
    if (!p.gone) assert.notEqual(p.uids[0], '0', `${p.comm} in ${broker} runs as root`);
  }
});

step('compose publishes the bridge on the host loopback only, and the broker not at all', async () => {
  const r = await podman('port', bridge, '8080/tcp');
  assert.equal(r.code, 0, show(r));
  const m = r.stdout.trim().match(/^127\.0\.0\.1:(\d+)$/);
  assert.ok(m, `podman port ${bridge}: ${r.stdout}`);
  port = Number(m[1]);
  const b = await podman('port', broker);
  assert.equal(b.stdout.trim(), '', `the broker (anonymous clients) is published: ${b.stdout}`);
});

let sessionMs;
step('an MCP SDK client on the host: initialize, tools/list, tools/call, through the broker to npx server-everything', async () => {
  assert.ok(port, 'no published port (see the test before)');
  const node = process.execPath; // the pinned Node of tests/node, which runs this file
  const message = `hello from the host ${randomUUID()}`;
  const script = {
    steps: [
      { op: 'listTools', label: 'tools/list' },
      { op: 'callTool', label: 'echo', name: 'echo', arguments: { message } },
      { op: 'callTool', label: 'get-sum', name: 'get-sum', arguments: { a: 20, b: 22 } },
      { op: 'terminateSession', label: 'DELETE' },
    ],
  };
  const start = Date.now();
  // The first session starts npx, which fetches server-everything from the npm registry into the
  // container's volume: the first initialize waits for that.
  const r = await run(node, [join(root, 'tests/node/sdk-client.mjs'), '--url', `http://127.0.0.1:${port}/mcp`,
    '--timeout-ms', '120000', '--script-json', JSON.stringify(script)], { timeoutMs: 300_000 });
  sessionMs = Date.now() - start;
  const lines = r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(r.code, 0, show(r));
  const connected = lines.find((l) => l.type === 'connected');
  assert.equal(connected?.serverInfo?.name, 'mcp-servers/everything', show(r));
  const stepResult = (label) => lines.find((l) => l.type === 'step' && l.label === label);
  const tools = stepResult('tools/list')?.result?.tools?.map((t) => t.name) ?? [];
  assert.ok(tools.includes('echo') && tools.includes('get-sum'), `tools: ${tools.join(', ')}`);
  assert.deepEqual(stepResult('echo')?.result?.content, [{ type: 'text', text: `Echo: ${message}` }]);
  assert.match(stepResult('get-sum')?.result?.content?.[0]?.text ?? '', /\b42\b/);
  console.log(`# session (npx fetching and starting server-everything included): ${sessionMs} ms`);
}, 330_000);

step('after the session its server processes are gone, and no zombie is left', async () => {
  // The bridge closes the child's stdin, then SIGTERM after 2 s and SIGKILL after 3 s more
  // (egress.terminate_after_ms, kill_after_ms): well within 20 s.
  await waitFor('only the init and the daemon, none a zombie', 20_000, async () => {
    const ps = (await processes(bridge)).filter((p) => !p.gone);
    const ok = ps.length === 2 && ps.every((p) => p.state !== 'Z') &&
      ps.some((p) => p.pid === '1') && ps.some((p) => p.comm === 'mcp-mqtt-bridge');
    return { value: ok ? true : undefined, seen: describe(ps) };
  });
});

step('podman stop (SIGTERM): the bridge exits 0 within its grace and its retained presence is cleared', async () => {
  const before = (await retainedPresence()).filter((t) => t.endsWith('/demo/everything'));
  assert.equal(before.length, 1, `retained presence of demo/everything before the stop: ${before}`);
  const start = Date.now();
  // No --time: the container's own stop timeout, compose's stop_grace_period (20 s).
  const stop = await podman('stop', bridge);
  const took = Date.now() - start;
  assert.equal(stop.code, 0, show(stop));
  const exit = await podman('inspect', '--format', '{{.State.ExitCode}}', bridge);
  assert.equal(exit.stdout.trim(), '0', `exit status after SIGTERM (took ${took} ms)`);
  // daemon.shutdown_grace_ms is 5 s; a SIGKILL would come only after 20 s.
  assert.ok(took < 15_000, `podman stop took ${took} ms`);
  const afterStop = await retainedPresence();
  assert.deepEqual(afterStop.filter((t) => before.includes(t)), [], `still retained: ${afterStop}`);
});

step('the image alone, as `docker run` starts it: its own configuration and HEALTHCHECK', async () => {
  // The README's docker run line, on the compose network so that it finds the broker.
  const r = await podman('run', '--detach', '--name', standalone, '--init', '--network', `${project}_default`,
    '--env', 'MCPMQTT_BROKER=mqtt://mosquitto:1883', bridgeImage);
  assert.equal(r.code, 0, show(r));
  await waitFor('the image\'s HEALTHCHECK', 30_000, async () => {
    const h = await podman('healthcheck', 'run', standalone);
    return { value: h.code === 0 ? true : undefined, seen: show(h) };
  });
  // Its presence on the broker: the baked-in bridge.jsonc's server, announced.
  await waitFor('presence of the standalone bridge', 30_000, async () => {
    const topics = (await retainedPresence()).filter((t) => t.endsWith('/demo/everything'));
    return { value: topics.length === 1 ? true : undefined, seen: topics.join(', ') };
  });
  const stop = await podman('stop', standalone);
  assert.equal(stop.code, 0, show(stop));
  const exit = await podman('inspect', '--format', '{{.State.ExitCode}}', standalone);
  assert.equal(exit.stdout.trim(), '0');
});
