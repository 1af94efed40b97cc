// A webhook receiver for the tests: every POST is verified with the npm `standardwebhooks`
// package (an implementation of Standard Webhooks nobody on the team wrote) and reported on
// stdout, one JSON object per line:
//   {"type":"listening","port":N}
//   {"type":"webhook","path":"/a","id":"msg_…","verified":true,"status":204,"body":{…}}
// Control (from the test), on the same port:
//   PUT /control/secret/<path>   body: the whsec_… key for webhooks POSTed to /<path>
//   PUT /control/status/<path>   body: the HTTP status to answer verified webhooks with
//                                (default 204), e.g. 410; unverified ones get 401
//
//   node webhook-receiver.mjs [--port N]      (0 or none: a free port)
import http from 'node:http';
import { Webhook } from 'standardwebhooks';

const args = process.argv.slice(2);
const port = Number(args[args.indexOf('--port') + 1] || 0) || 0;
const secrets = new Map();
const statuses = new Map();

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const control = req.url.match(/^\/control\/(secret|status)(\/.*)$/);
    if (control) {
      (control[1] === 'secret' ? secrets : statuses).set(control[2], body.trim());
      res.writeHead(204).end();
      return;
    }
    const path = req.url;
    let verified = false;
    let parsed = null;
    let error;
    try {
      const key = secrets.get(path);
      if (!key) throw new Error('no secret for ' + path);
      parsed = new Webhook(key).verify(body, {
        'webhook-id': req.headers['webhook-id'],
        'webhook-timestamp': req.headers['webhook-timestamp'],
        'webhook-signature': req.headers['webhook-signature'],
      });
      verified = true;
    } catch (e) {
      error = String(e && e.message ? e.message : e);
    }
    // An unverified webhook is refused (401), as a careful receiver would: the bridge retries.
    const status = verified ? Number(statuses.get(path) || 204) : 401;
    emit({ type: 'webhook', path, id: req.headers['webhook-id'] || null, verified, error,
           status, raw: body, body: parsed });
    res.writeHead(status).end();
  });
});
server.keepAliveTimeout = 60000;
server.listen(port, '127.0.0.1', () => emit({ type: 'listening', port: server.address().port }));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
