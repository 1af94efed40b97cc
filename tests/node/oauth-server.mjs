// A real OAuth 2.1 authorization server for the bridge's resource-server tests (issue 31):
// oidc-provider (pinned in package.json; a certified OpenID Provider) on a loopback port, set up
// the way an MCP deployment's authorization server is, with no human in the loop.
// Run it with the pinned Node (scripts/setup-node.sh prints its path).
//
// USAGE
//   node oauth-server.mjs [--port N] [--host 127.0.0.1] [--alg RS256|PS256|ES256|EdDSA]
//                         [--scopes "mcp:all mcp:weather"] [--account alice] [--client ID:SECRET]...
//                         [--ttl SECONDS] [--format jwt|opaque] [--resource URL]... [--deny]
//                         [--ignore-stdin]
//
//   --port N            listen port (default 0: a free one); the issuer is http://HOST:PORT
//   --host H            listen address (default 127.0.0.1; ::1 gives the issuer http://[::1]:PORT)
//   --alg A             the signing key generated at start, and the JWS alg of access tokens
//                       (default RS256: RSA 2048; PS256: RSA 2048; ES256: P-256; EdDSA: Ed25519).
//                       A new key (new kid) every start: restart on the same --port to rotate keys.
//   --scopes "S ..."    the scopes of every resource (default "mcp:all mcp:weather")
//   --account NAME      who "logs in" and consents at the authorization endpoint (default alice):
//                       becomes the access token's sub
//   --client ID:SECRET[:METHOD]   a pre-registered confidential client for the client_credentials
//                       grant (METHOD client_secret_basic, the default, or client_secret_post);
//                       repeatable. Its tokens have sub = client_id. It may also introspect.
//   --ttl SECONDS       access token lifetime (default 3600)
//   --format F          access token format for every resource: jwt (default; RFC 9068) or
//                       opaque (check with RFC 7662 introspection at introspection_endpoint)
//   --resource URL      accept only these resource indicators (exact match or, for a value
//                       ending in "/", as a prefix); repeatable. Default: any http(s) URL.
//   --deny              the "user" refuses: the authorization endpoint redirects back with
//                       error=access_denied
//   --metadata M        which metadata URLs answer: both (default), oauth (RFC 8414 only; OpenID
//                       discovery is 404) or oidc (OpenID discovery only; RFC 8414 is 404)
//   --ignore-stdin      keep running when stdin closes (for `node oauth-server.mjs &` in a shell,
//                       whose background jobs get /dev/null as stdin)
//
// BEHAVIOUR
//   - Metadata: RFC 8414 at /.well-known/oauth-authorization-server and OpenID discovery at
//     /.well-known/openid-configuration (the same document); JWKS at /jwks (public keys only).
//   - RFC 7591 dynamic client registration at /reg, open (no initial access token), public
//     clients (token_endpoint_auth_method "none") included. A registered `scope` is accepted
//     and dropped: it does not restrict what the client may ask for later (step-up).
//   - Authorization code flow with PKCE required (S256 is the only method offered), RFC 9207 `iss`
//     in the authorization response. The login and consent interactions complete by themselves
//     (303 redirects, cookies): login as --account, consent to every scope requested that the
//     resource offers. A client only has to follow the redirects, keeping cookies.
//   - RFC 8707 resource indicators: a `resource` (at the authorization and/or token endpoint)
//     gets an access token for that resource: a JWT (RFC 9068: header typ "at+jwt", kid; claims
//     iss, sub, aud = the resource exactly as sent, exp, iat, jti, client_id, scope = the requested
//     scopes this resource offers). Without a resource the token is opaque and only good for the
//     AS itself (no userinfo endpoint here, so useless): MCP clients must send `resource`.
//   - client_credentials grant for --client clients, same token rules (`resource` and `scope` in
//     the request); refresh tokens for clients that registered the refresh_token grant and asked
//     for offline_access (the v2 SDK does); RFC 7009 revocation; RFC 7662 introspection.
//
// OUTPUT
//   stdout, once listening, one line:
//     {"issuer":"http://127.0.0.1:PORT","port":PORT,"alg":"RS256","kid":"...",
//      "jwks_uri":"...","token_endpoint":"...","registration_endpoint":"...",
//      "introspection_endpoint":"..."}
//   stderr: one line per HTTP request (method, path without query, status, ms) and per
//   oidc-provider event of note (registrations, grants, errors). Tokens, codes and secrets are never
//   logged.
//   Exits 0 on SIGTERM/SIGINT or when stdin closes (unless --ignore-stdin); 2 on bad usage; 1 if
//   it cannot listen.
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const ALGS = {
  RS256: () => generateKeyPairSync('rsa', { modulusLength: 2048 }),
  PS256: () => generateKeyPairSync('rsa', { modulusLength: 2048 }),
  ES256: () => generateKeyPairSync('ec', { namedCurve: 'P-256' }),
  EdDSA: () => generateKeyPairSync('ed25519'),
};

const log = (msg) => process.stderr.write(`oauth-server: ${msg}\n`);

function usage(message) {
  if (message) log(message);
  (message ? console.error : console.log)(
    'usage: oauth-server.mjs [--port N] [--host H] [--alg RS256|PS256|ES256|EdDSA] [--scopes "S ..."]\n' +
      '                        [--account NAME] [--client ID:SECRET[:METHOD]]... [--ttl SECONDS]\n' +
      '                        [--format jwt|opaque] [--resource URL]... [--deny]\n' +
      '                        [--metadata both|oauth|oidc] [--ignore-stdin]\n' +
      'Options and output are described at the top of oauth-server.mjs.',
  );
  process.exit(message ? 2 : 0);
}

function parseArgs(argv) {
  const o = {
    port: 0,
    host: '127.0.0.1',
    alg: 'RS256',
    scopes: ['mcp:all', 'mcp:weather'],
    account: 'alice',
    clients: [],
    ttl: 3600,
    format: 'jwt',
    resources: [],
    deny: false,
    metadata: 'both',
    watchStdin: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    switch (a) {
      case '--port':
        o.port = Number(value());
        if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) usage('--port: expected 0..65535');
        break;
      case '--host':
        o.host = value();
        break;
      case '--alg':
        o.alg = value();
        if (!ALGS[o.alg]) usage(`--alg ${o.alg}: expected one of ${Object.keys(ALGS).join(', ')}`);
        break;
      case '--scopes':
        o.scopes = value().split(/\s+/).filter(Boolean);
        break;
      case '--account':
        o.account = value();
        if (!o.account) usage('--account: empty');
        break;
      case '--client': {
        const [id, secret, method = 'client_secret_basic', ...rest] = value().split(':');
        if (!id || !secret || rest.length || !['client_secret_basic', 'client_secret_post'].includes(method)) {
          usage('--client: expected ID:SECRET or ID:SECRET:client_secret_basic|client_secret_post');
        }
        o.clients.push({ id, secret, method });
        break;
      }
      case '--ttl':
        o.ttl = Number(value());
        if (!Number.isInteger(o.ttl) || o.ttl < 1) usage('--ttl: expected a positive number of seconds');
        break;
      case '--format':
        o.format = value();
        if (!['jwt', 'opaque'].includes(o.format)) usage('--format: expected jwt or opaque');
        break;
      case '--resource':
        o.resources.push(value());
        break;
      case '--deny':
        o.deny = true;
        break;
      case '--metadata':
        o.metadata = value();
        if (!['both', 'oauth', 'oidc'].includes(o.metadata)) usage('--metadata: expected both, oauth or oidc');
        break;
      case '--ignore-stdin':
        o.watchStdin = false;
        break;
      case '-h':
      case '--help':
        usage();
        break;
      default:
        usage(`unknown argument ${a}`);
    }
  }
  return o;
}

const o = parseArgs(process.argv.slice(2));

// The key is made here, not by oidc-provider (which would fall back to a fixed development key).
const kid = randomUUID();
const { privateKey } = ALGS[o.alg]();
const jwk = { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig', alg: o.alg };

function resourceAllowed(indicator) {
  const url = URL.parse(indicator);
  if (!url || !['http:', 'https:'].includes(url.protocol)) return false;
  if (!o.resources.length) return true;
  return o.resources.some((r) => (r.endsWith('/') ? indicator.startsWith(r) : indicator === r));
}

// Listen first: with --port 0 the issuer (which contains the port) is known only afterwards.
const server = http.createServer();
await new Promise((resolve) => {
  server.once('error', (e) => {
    log(`cannot listen on ${o.host}:${o.port}: ${e.message}`);
    process.exit(1);
  });
  server.listen(o.port, o.host, resolve);
});
const { port } = server.address();
const issuer = `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}`;

const configuration = {
  jwks: { keys: [jwk] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  // The resource scopes are listed too: the SDKs put the scope they will ask for into the
  // registration request, and oidc-provider accepts only scopes it advertises there.
  scopes: ['openid', 'offline_access', ...o.scopes],
  responseTypes: ['code'],
  clients: o.clients.map((c) => ({
    client_id: c.id,
    client_secret: c.secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: c.method,
  })),
  clientDefaults: {
    grant_types: ['authorization_code'],
    response_types: ['code'],
    id_token_signed_response_alg: o.alg,
  },
  enabledJWA: { idTokenSigningAlgValues: [o.alg] },
  // A client's registered `scope` does not limit what it may ask for later: dropped at
  // registration, so that a step-up to another scope of the resource (403 insufficient_scope,
  // SEP-835) is not refused by a restriction the MCP authorization spec does not ask for.
  extraClientMetadata: {
    properties: ['urn:mcp-mqtt-bridge:test'],
    validator(ctx, key, value, metadata) {
      if (ctx) delete metadata.scope;
    },
  },
  async findAccount(ctx, sub) {
    return { accountId: sub, async claims() { return { sub }; } };
  },
  clientBasedCORS: () => true,
  // A client credentials token's sub is its client_id: the JWT format says so by itself, and
  // this says it in an opaque token's introspection response too (RFC 9068 §2.2, RFC 7662 §2.2).
  async extraTokenClaims(ctx, token) {
    return token.accountId ? undefined : { sub: token.clientId };
  },
  pkce: { required: () => true },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: { enabled: false },
    registration: { enabled: true, initialAccessToken: false },
    clientCredentials: { enabled: true },
    introspection: {
      enabled: true,
      // Confidential clients (the --client ones, e.g. a resource server) may introspect any
      // token; a public client only its own.
      async allowedPolicy(ctx, client, token) {
        return client.clientAuthMethod !== 'none' || token.clientId === client.clientId;
      },
    },
    revocation: {
      enabled: true,
      async allowedPolicy(ctx, client, token) {
        return token.clientId === client.clientId;
      },
    },
    userinfo: { enabled: false },
    resourceIndicators: {
      enabled: true,
      useGrantedResource: async () => true,
      async getResourceServerInfo(ctx, indicator) {
        if (!resourceAllowed(indicator)) {
          throw new errors.InvalidTarget(`resource indicator ${indicator} is not served by this authorization server`);
        }
        return {
          scope: o.scopes.join(' '),
          accessTokenTTL: o.ttl,
          accessTokenFormat: o.format,
          ...(o.format === 'jwt' && { jwt: { sign: { alg: o.alg } } }),
        };
      },
    },
  },
  ttl: {
    AccessToken: o.ttl,
    ClientCredentials: o.ttl,
    AuthorizationCode: 60,
    Grant: 24 * 3600,
    Interaction: 600,
    Session: 24 * 3600,
    RefreshToken: 24 * 3600,
    IdToken: 3600,
  },
  async renderError(ctx, out) {
    ctx.type = 'application/json';
    ctx.body = out;
  },
};

const provider = new Provider(issuer, configuration);

// One line per request on stderr, without query strings (they carry codes and PKCE values).
provider.use(async (ctx, next) => {
  const start = Date.now();
  try {
    await next();
  } finally {
    log(`${ctx.method} ${ctx.path} -> ${ctx.status} (${Date.now() - start} ms)`);
  }
});

// --metadata: which of the two well-known metadata URLs answer (the other is 404), so that a
// client's fallback from RFC 8414 to OpenID discovery (or the reverse) can be seen working.
provider.use(async (ctx, next) => {
  const hidden = { oauth: '/.well-known/openid-configuration', oidc: '/.well-known/oauth-authorization-server' }[o.metadata];
  if (ctx.path === hidden) {
    ctx.status = 404;
    ctx.body = { error: 'not_found', error_description: `not served (oauth-server.mjs --metadata ${o.metadata})` };
    return undefined;
  }
  return next();
});

// The "user": logs in as --account and consents to what was asked, without any page.
provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([^/]+)$/.exec(ctx.path);
  if (!match || ctx.method !== 'GET') return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session } = details;
  if (o.deny) {
    log(`interaction ${prompt.name}: denied (--deny)`);
    return provider.interactionFinished(
      ctx.req,
      ctx.res,
      { error: 'access_denied', error_description: 'the end-user refused (oauth-server.mjs --deny)' },
      { mergeWithLastSubmission: false },
    );
  }
  if (prompt.name === 'login') {
    log(`interaction login: ${o.account} for client ${params.client_id}`);
    return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: o.account } }, { mergeWithLastSubmission: false });
  }
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const d = prompt.details;
    if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
    if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    log(
      `interaction consent: client ${params.client_id}, scope "${params.scope ?? ''}", resource ` +
        `${JSON.stringify(params.resource ?? null)}`,
    );
    return provider.interactionFinished(
      ctx.req,
      ctx.res,
      { consent: details.grantId ? {} : { grantId } },
      { mergeWithLastSubmission: true },
    );
  }
  ctx.status = 400;
  ctx.body = { error: 'invalid_request', error_description: `unsupported interaction prompt ${prompt.name}` };
  return undefined;
});

provider.on('registration_create.success', (ctx, client) =>
  log(
    `registered client ${client.clientId} (${client.tokenEndpointAuthMethod}, ${client.applicationType}, ` +
      `redirect_uris ${JSON.stringify(client.redirectUris)}, scope "${client.scope ?? ''}")`,
  ),
);
provider.on('grant.success', (ctx) => {
  const { params, client } = ctx.oidc;
  log(`token issued: grant_type ${params.grant_type}, client ${client?.clientId}, resource ${JSON.stringify(params.resource ?? null)}`);
});
for (const event of [
  'authorization.error',
  'backchannel.error',
  'discovery.error',
  'grant.error',
  'introspection.error',
  'jwks.error',
  'registration_create.error',
  'revocation.error',
  'server_error',
]) {
  provider.on(event, (ctx, err) => {
    const e = err ?? ctx;
    const detail = [e?.error_description, e?.error_detail].filter(Boolean).join('; ');
    log(`${event}: ${e?.name ?? 'Error'} ${e?.message ?? ''}${detail ? ` (${detail})` : ''}`);
  });
}

server.on('request', provider.callback());

process.stdout.write(
  `${JSON.stringify({
    issuer,
    port,
    alg: o.alg,
    kid,
    jwks_uri: `${issuer}/jwks`,
    token_endpoint: `${issuer}/token`,
    registration_endpoint: `${issuer}/reg`,
    introspection_endpoint: `${issuer}/token/introspection`,
  })}\n`,
);
log(
  `listening: issuer ${issuer}, ${o.alg} key ${kid}, scopes "${o.scopes.join(' ')}", account ${o.account}, ` +
    `${o.clients.length} pre-registered client(s), ${o.format} tokens for ${o.ttl} s`,
);

let stopping = false;
function stop(why) {
  if (stopping) return;
  stopping = true;
  log(`stopping (${why})`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => stop(signal));
if (o.watchStdin) {
  process.stdin.on('end', () => stop('stdin closed'));
  process.stdin.on('error', () => stop('stdin error'));
  process.stdin.resume();
}
