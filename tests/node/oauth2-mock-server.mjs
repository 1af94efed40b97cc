// A real OAuth 2 authorization server for the tests: the npm `oauth2-mock-server` (nobody on the
// team wrote it) on 127.0.0.1, with one RS256 and one ES256 signing key generated at start. It
// serves what the package serves — OpenID Connect discovery (/.well-known/openid-configuration,
// not RFC 8414's document), /jwks, /token (client credentials and the other grants) — and prints
// one line on stdout once it listens:
//   OAUTH_ISSUER_URL=http://127.0.0.1:PORT
//
// Tokens it issues are JWT access tokens as RFC 9068 has them: header typ "at+jwt", `sub` the
// client id, `client_id`, and `aud` the RFC 8707 `resource` of the token request.
//
// Control routes for the tests, on the same port (JSON in, JSON out):
//   GET  /test/stats                 {"requests":{"/jwks":N,...},"token_requests":[{grant_type,
//                                    auth:"basic"|"post"|"none", basic_user, basic_password,
//                                    client_id, client_secret, scope, resource}, ...]}
//   POST /test/token {kid?, alg?, sub?, aud?, scope?, expires_in?, typ?}
//                                    → {"token": a JWT signed with that key, or the first of that
//                                    algorithm (default: the RS256 one)}
//   POST /test/keys {alg}            → {"kid": a new key of that algorithm, now in /jwks}
//   POST /test/expires-in {seconds}  expires_in of later token responses (default 3600)
//   POST /test/token-error {status, error, error_description, count?}
//                                    the next `count` (default 1) token requests get that error
//   POST /test/jwks-cache-control {value}   Cache-Control of /jwks responses ("" for none)
//
//   node oauth2-mock-server.mjs [--port N]      (0 or none: a free port)
import http from 'node:http';
import { Events, OAuth2Issuer, OAuth2Service } from 'oauth2-mock-server';

const args = process.argv.slice(2);
const portArg = args.indexOf('--port');
const port = portArg >= 0 ? Number(args[portArg + 1]) || 0 : 0;
const host = '127.0.0.1';

const issuer = new OAuth2Issuer();
const rsa = await issuer.keys.generate('RS256');
await issuer.keys.generate('ES256');
const service = new OAuth2Service(issuer);

const requests = {};
const tokenRequests = [];
let expiresIn = 3600;
let tokenErrors = [];
let jwksCacheControl = '';

function basicCredentials(req) {
  const m = /^Basic\s+(.+)$/i.exec(req.headers.authorization ?? '');
  if (!m) return null;
  const text = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? null : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

// RFC 6749 §2.3.1: the Basic credentials are form-encoded before base64.
function formDecode(s) {
  return decodeURIComponent(s.replace(/\+/g, ' '));
}

// Every token: an RFC 9068 access token for the requested resource.
service.on(Events.BeforeTokenSigning, (token, req) => {
  const body = req.body ?? {};
  const basic = basicCredentials(req);
  const clientId = basic ? formDecode(basic.user) : body.client_id;
  token.header.typ = 'at+jwt';
  Object.assign(token.payload, { sub: clientId, client_id: clientId });
  if (body.resource !== undefined) token.payload.aud = body.resource;
});

service.on(Events.BeforeResponse, (response, req) => {
  const body = req.body ?? {};
  const basic = basicCredentials(req);
  tokenRequests.push({
    grant_type: body.grant_type,
    auth: basic ? 'basic' : body.client_secret !== undefined ? 'post' : 'none',
    basic_user: basic ? basic.user : null,
    basic_password: basic ? basic.password : null,
    client_id: body.client_id ?? null,
    client_secret: body.client_secret ?? null,
    scope: body.scope ?? null,
    resource: body.resource ?? null,
  });
  if (tokenErrors.length > 0) {
    const e = tokenErrors.shift();
    response.statusCode = e.status ?? 400;
    response.body = { error: e.error, error_description: e.error_description };
    return;
  }
  if (response.statusCode === 200) response.body.expires_in = expiresIn;
});

function readJson(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'));
      } catch {
        resolve({});
      }
    });
  });
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

async function control(req, res, path) {
  const body = req.method === 'POST' ? await readJson(req) : {};
  switch (`${req.method} ${path}`) {
    case 'GET /test/stats':
      return send(res, 200, { requests, token_requests: tokenRequests });
    case 'POST /test/token': {
      const byAlg = issuer.keys.toJSON().find((k) => k.alg === body.alg);
      const token = await issuer.buildToken({
        kid: body.kid ?? byAlg?.kid ?? rsa.kid,
        expiresIn: body.expires_in ?? 3600,
        scopesOrTransform: (header, payload) => {
          header.typ = body.typ ?? 'at+jwt';
          payload.sub = body.sub ?? 'alice';
          if (body.aud !== undefined) payload.aud = body.aud;
          if (body.scope !== undefined) payload.scope = body.scope;
        },
      });
      return send(res, 200, { token });
    }
    case 'POST /test/keys': {
      const key = await issuer.keys.generate(body.alg ?? 'ES256');
      return send(res, 200, { kid: key.kid });
    }
    case 'POST /test/expires-in':
      expiresIn = Number(body.seconds);
      return send(res, 200, {});
    case 'POST /test/token-error':
      tokenErrors = Array.from({ length: body.count ?? 1 }, () => body);
      return send(res, 200, {});
    case 'POST /test/jwks-cache-control':
      jwksCacheControl = String(body.value ?? '');
      return send(res, 200, {});
    default:
      return send(res, 404, { error: 'no such control route' });
  }
}

const server = http.createServer((req, res) => {
  const path = new URL(req.url, `http://${host}`).pathname;
  if (path.startsWith('/test/')) {
    control(req, res, path).catch((e) => send(res, 500, { error: String(e) }));
    return;
  }
  requests[path] = (requests[path] ?? 0) + 1;
  if (path === '/jwks' && jwksCacheControl !== '') res.setHeader('Cache-Control', jwksCacheControl);
  service.requestHandler(req, res);
});
server.listen(port, host, () => {
  issuer.url = `http://${host}:${server.address().port}`;
  process.stdout.write(`OAUTH_ISSUER_URL=${issuer.url}\n`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
