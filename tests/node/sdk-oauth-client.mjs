// An MCP client that authorizes the way a desktop host does, on the official TypeScript SDK's own
// OAuth support (SDK v1 @modelcontextprotocol/sdk 1.32.2, or the v2 @modelcontextprotocol/client
// 2.4.0), for the bridge's resource-server tests (issue 31). Run it with the pinned Node
// (scripts/setup-node.sh prints its path).
//
// USAGE
//   node sdk-oauth-client.mjs --url MCP_URL [--sdk v1|v2] [--era 2025|2026|auto] [--scope "S ..."]
//                             [--call TOOL [--args JSON]]... [--redirect-uri URI]
//                             [--client-name NAME] [--timeout-ms N] [--allow-anonymous]
//
//   --sdk v1|v2     which SDK (default v1)
//   --era           2025 (default): the 2025 revisions (v1 always; v2 with versionNegotiation
//                   'legacy'); 2026: v2 pinned to 2026-07-28 (server/discover, no initialize);
//                   auto: v2 probes server/discover and falls back to initialize
//   --scope         the client metadata's `scope`. The SDKs choose the scope by SEP-835: the 401's
//                   WWW-Authenticate scope, else the protected resource metadata's
//                   scopes_supported, else this; the output says which was requested and granted
//   --call/--args   a tools/call after tools/list (arguments JSON, default {}); repeatable
//   --redirect-uri  the registered redirect URI (default http://127.0.0.1/oauth/callback). Nothing
//                   listens there: the client follows the authorization server's redirects itself
//                   and stops at that URI, reading code, state and iss from it
//   --allow-anonymous   also succeed when the server never asks for authorization (no 401)
//
// WHAT IT DOES, as a desktop host with an in-memory OAuthClientProvider:
//   connect → 401 (WWW-Authenticate: Bearer resource_metadata=...) → the SDK fetches the RFC 9728
//   protected resource metadata, then the authorization server's metadata (RFC 8414, then OpenID
//   discovery), registers a public client (RFC 7591, token_endpoint_auth_method none), builds the
//   authorization URL (PKCE S256, `resource`, `scope`, `state`) and calls
//   redirectToAuthorization(url). Here that "browser" is fetch with manual redirects and a cookie
//   jar, following the authorization server (its login and consent complete by themselves) until
//   it lands on the redirect URI with `code`. The SDK's connect then fails with UnauthorizedError,
//   as it does in a host; the client checks `state`, calls transport.finishAuth (v1: the code; v2:
//   the callback's query, so RFC 9207 `iss` is checked), which posts the code, the PKCE verifier
//   and `resource` to the token endpoint, and connects again with a new transport and client,
//   now with `Authorization: Bearer`. Then tools/list and the calls asked for. A request that
//   sends the browser off again (a 403 insufficient_scope step-up, or a 401 the SDK cannot answer
//   by refreshing) is retried after the client has finished that authorization too; at most 3
//   authorizations in all.
//
// OUTPUT: one JSON line on stdout
//   {"ok":true|false, "sdk":"v1", "era":"2025", "url":"...",
//    "steps":[ every HTTP exchange the SDK made (through a recording fetch that changes nothing)
//              and every hop of the "browser", in order:
//      {"step":"mcp","method":"initialize","status":401,"auth":false}   a request to --url (the
//             JSON-RPC method(s) of a POST, "GET stream" or "DELETE"; auth: it carried
//             Authorization)
//      {"step":"unauthorized","status":401,"wwwAuthenticate":"Bearer ...","resourceMetadata":"URL"}
//      {"step":"forbidden","status":403,"wwwAuthenticate":"...","scope":"..."}  (step-up)
//      {"step":"resourceMetadata","url":"...","status":200,"body":{...}}   RFC 9728 document
//      {"step":"authorizationServerMetadata","url":"...","status":404|200,"issuer":"..."}
//      {"step":"registration","url":"...","status":201,"request":{...},"clientId":"...",
//       "tokenEndpointAuthMethod":"none"}      (on an error: "response" instead of clientId)
//      {"step":"authorize","url":"...","params":{...},"hops":[{"status":303,"to":"URL"},...]}
//             (code_challenge and state shown as "(present)")
//      {"step":"callback","code":true,"state":"ok"|"mismatch"|"missing","iss":"...","error":...}
//      {"step":"token","url":"...","status":200,"request":{"grant_type":...,"resource":...,
//       "scope":...,"code_verifier":true,...},"response":{"token_type","expires_in","scope",
//       "refresh_token":true|false}}          (on an error: the error body as response)
//      {"step":"http","method":"...","url":"...","status":N}   anything else ],
//    "flow":{"unauthorized":true, "resourceMetadataUrl":"the 401's resource_metadata",
//            "resourceMetadataFetched":"URL that answered 200", "authorizationServerMetadataUrl":
//            "URL that answered 200", "registered":"CLIENT_ID", "resource":"...",
//            "scopeRequested":"...", "token":true, "scopeGranted":"...", "authorizations":N},
//            (the last authorization's values where there were several)
//    "accessToken":{"format":"jwt","header":{...},"claims":{...}}  (decoded, never the token;
//            {"format":"opaque"} otherwise)
//    "protocolVersion":"...", "protocolEra":"modern"|"legacy" (v2), "serverInfo":{...},
//    "tools":["..."], "calls":[{"name":"...","ok":true,"result":{...}} |
//                              {"name":"...","ok":false,"error":{...}}],
//    "error":{"name":"...","message":"...","code":...,"oauthError":"...","status":N,
//             "lastHttpError":{"url":"...","status":N}}       when something failed
//   }
//   Diagnostics (the SDK's warnings, the redirect chain) go to stderr.
//
// EXIT STATUS: 0 the flow (unless --allow-anonymous), tools/list and every call succeeded (a tool
// result with isError counts as a failure); 1 a call failed; 2 bad usage; 3 could not authorize
// or connect.
import { randomBytes } from 'node:crypto';

const MODERN = '2026-07-28';

function usage(message) {
  if (message) console.error(`sdk-oauth-client: ${message}`);
  (message ? console.error : console.log)(
    'usage: sdk-oauth-client.mjs --url MCP_URL [--sdk v1|v2] [--era 2025|2026|auto] [--scope "S ..."]\n' +
      '                            [--call TOOL [--args JSON]]... [--redirect-uri URI] [--client-name NAME]\n' +
      '                            [--timeout-ms N] [--allow-anonymous]\n' +
      'What it does and prints is described at the top of sdk-oauth-client.mjs.',
  );
  process.exit(message ? 2 : 0);
}

function parseArgs(argv) {
  const o = {
    sdk: 'v1',
    era: '2025',
    calls: [],
    redirectUri: 'http://127.0.0.1/oauth/callback',
    clientName: 'mcp-mqtt-bridge-sdk-oauth-client',
    timeoutMs: 30000,
    allowAnonymous: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    switch (a) {
      case '--url':
        o.url = value();
        if (!URL.canParse(o.url)) usage(`--url ${o.url}: not a URL`);
        break;
      case '--sdk':
        o.sdk = value();
        if (!['v1', 'v2'].includes(o.sdk)) usage('--sdk: expected v1 or v2');
        break;
      case '--era':
        o.era = value();
        if (!['2025', '2026', 'auto'].includes(o.era)) usage('--era: expected 2025, 2026 or auto');
        break;
      case '--scope':
        o.scope = value();
        break;
      case '--call':
        o.calls.push({ name: value(), arguments: {} });
        break;
      case '--args': {
        if (!o.calls.length) usage('--args must follow a --call');
        const text = value();
        try {
          o.calls.at(-1).arguments = JSON.parse(text);
        } catch (e) {
          usage(`--args ${text}: ${e.message}`);
        }
        break;
      }
      case '--redirect-uri':
        o.redirectUri = value();
        if (!URL.canParse(o.redirectUri)) usage(`--redirect-uri ${o.redirectUri}: not a URL`);
        break;
      case '--client-name':
        o.clientName = value();
        break;
      case '--timeout-ms':
        o.timeoutMs = Number(value());
        if (!(o.timeoutMs > 0)) usage('--timeout-ms: expected a positive number');
        break;
      case '--allow-anonymous':
        o.allowAnonymous = true;
        break;
      case '-h':
      case '--help':
        usage();
        break;
      default:
        usage(`unknown argument ${a}`);
    }
  }
  if (!o.url) usage('--url is required');
  if (o.sdk === 'v1' && o.era !== '2025') usage('SDK v1 speaks only the 2025 revisions (--era 2025)');
  return o;
}

const o = parseArgs(process.argv.slice(2));
const mcpUrl = new URL(o.url);
const report = { ok: false, sdk: o.sdk, era: o.era, url: o.url, steps: [], flow: {} };
const step = (s) => report.steps.push(s);
const trace = (msg) => process.stderr.write(`sdk-oauth-client: ${msg}\n`);

// ---- what went over HTTP --------------------------------------------------------------------------

const asEndpoints = {}; // from the authorization server metadata the SDK fetched
let lastHttpError; // { url, status } of the last non-2xx answer, for the error report

const withoutQuery = (u) => `${u.origin}${u.pathname}`;

function decodeJwt(token) {
  const parts = typeof token === 'string' ? token.split('.') : [];
  if (parts.length !== 3) return { format: 'opaque', length: token?.length };
  try {
    const part = (p) => JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
    return { format: 'jwt', header: part(parts[0]), claims: part(parts[1]) };
  } catch {
    return { format: 'unparsable' };
  }
}

function jsonRpcMethods(body) {
  if (typeof body !== 'string') return undefined;
  try {
    const msg = JSON.parse(body);
    const list = (Array.isArray(msg) ? msg : [msg]).map((m) => m.method ?? (m.id !== undefined ? 'response' : '?'));
    return list.join(',');
  } catch {
    return undefined;
  }
}

function formParams(body) {
  if (body instanceof URLSearchParams) return body;
  if (typeof body === 'string') return new URLSearchParams(body);
  return new URLSearchParams();
}

async function readJson(res) {
  try {
    return await res.clone().json();
  } catch {
    return undefined;
  }
}

// The fetch every SDK request goes through (MCP and OAuth alike): it records, never changes.
async function recordingFetch(input, init = {}) {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const method = (init.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  const res = await fetch(input, init);
  if (!res.ok && !(res.status >= 300 && res.status < 400)) lastHttpError = { url: withoutQuery(url), status: res.status };
  const path = url.pathname;

  if (withoutQuery(url) === withoutQuery(mcpUrl)) {
    const m = method === 'POST' ? jsonRpcMethods(init.body) : method === 'GET' ? 'GET stream' : method;
    step({ step: 'mcp', method: m, status: res.status, auth: headers.has('authorization') });
    if (res.status === 401 || res.status === 403) {
      const www = res.headers.get('www-authenticate') ?? undefined;
      const rm = /resource_metadata="([^"]*)"/.exec(www ?? '')?.[1];
      const scope = /scope="([^"]*)"/.exec(www ?? '')?.[1];
      step({
        step: res.status === 401 ? 'unauthorized' : 'forbidden',
        status: res.status,
        wwwAuthenticate: www,
        ...(rm && { resourceMetadata: rm }),
        ...(scope && { scope }),
      });
      if (res.status === 401) {
        report.flow.unauthorized = true;
        if (rm && !report.flow.resourceMetadataUrl) report.flow.resourceMetadataUrl = rm;
      }
    }
  } else if (path.includes('/.well-known/oauth-protected-resource')) {
    const body = res.ok ? await readJson(res) : undefined;
    step({ step: 'resourceMetadata', url: withoutQuery(url), status: res.status, ...(body && { body }) });
    if (res.ok) report.flow.resourceMetadataFetched = withoutQuery(url);
  } else if (path.includes('/.well-known/oauth-authorization-server') || path.includes('/.well-known/openid-configuration')) {
    const body = res.ok ? await readJson(res) : undefined;
    step({ step: 'authorizationServerMetadata', url: withoutQuery(url), status: res.status, ...(body && { issuer: body.issuer }) });
    if (body) {
      Object.assign(asEndpoints, body);
      report.flow.authorizationServerMetadataUrl = withoutQuery(url);
    }
  } else if (asEndpoints.registration_endpoint && withoutQuery(url) === asEndpoints.registration_endpoint) {
    let request;
    try {
      request = JSON.parse(init.body);
    } catch {
      request = undefined;
    }
    const body = await readJson(res);
    step({
      step: 'registration',
      url: withoutQuery(url),
      status: res.status,
      ...(request && { request }),
      ...(body?.client_id ? { clientId: body.client_id, tokenEndpointAuthMethod: body.token_endpoint_auth_method } : { response: body }),
    });
    if (body?.client_id) report.flow.registered = body.client_id;
  } else if (asEndpoints.token_endpoint && withoutQuery(url) === asEndpoints.token_endpoint) {
    const p = formParams(init.body);
    const request = {
      grant_type: p.get('grant_type') ?? undefined,
      ...(p.has('resource') && { resource: p.getAll('resource').join(' ') }),
      ...(p.has('scope') && { scope: p.get('scope') }),
      ...(p.has('code_verifier') && { code_verifier: true }),
      ...(p.has('redirect_uri') && { redirect_uri: p.get('redirect_uri') }),
      ...(p.has('client_id') && { client_id: p.get('client_id') }),
    };
    const body = await readJson(res);
    const response = res.ok && body
      ? {
          token_type: body.token_type,
          expires_in: body.expires_in,
          scope: body.scope,
          refresh_token: body.refresh_token !== undefined,
        }
      : body;
    step({ step: 'token', url: withoutQuery(url), status: res.status, request, response });
    if (res.ok && body?.access_token) {
      report.flow.token = true;
      report.flow.scopeGranted = body.scope;
      report.accessToken = decodeJwt(body.access_token);
    }
  } else {
    step({ step: 'http', method, url: withoutQuery(url), status: res.status });
  }
  return res;
}

// ---- the "browser" ----------------------------------------------------------------------------

// A small cookie jar: name, value, path; enough for an authorization server's session and
// interaction cookies on one host.
class CookieJar {
  #cookies = new Map(); // `${path}\n${name}` -> { name, value, path }

  store(url, setCookies) {
    for (const line of setCookies) {
      const [pair, ...attrs] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      if (eq <= 0) continue;
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      let path = url.pathname.replace(/\/[^/]*$/, '') || '/';
      let expired = false;
      for (const attr of attrs) {
        const [k, v = ''] = attr.split('=');
        const key = k.toLowerCase();
        if (key === 'path') path = v || '/';
        if (key === 'max-age' && Number(v) <= 0) expired = true;
        if (key === 'expires' && Date.parse(v) <= Date.now()) expired = true;
      }
      const key = `${path}\n${name}`;
      if (expired || value === '') this.#cookies.delete(key);
      else this.#cookies.set(key, { name, value, path });
    }
  }

  header(url) {
    const matches = (path) => url.pathname === path || url.pathname.startsWith(path.endsWith('/') ? path : `${path}/`);
    return [...this.#cookies.values()]
      .filter((c) => matches(c.path))
      .sort((a, b) => b.path.length - a.path.length)
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }
}

const jar = new CookieJar();

// Follows the authorization URL as a browser would, without ever rendering a page: every answer
// must be a redirect until the redirect URI is reached. Returns the callback URL.
async function followAuthorization(authorizationUrl, redirectUri) {
  const params = Object.fromEntries(authorizationUrl.searchParams);
  for (const secret of ['code_challenge', 'state']) if (params[secret] !== undefined) params[secret] = '(present)';
  const record = { step: 'authorize', url: withoutQuery(authorizationUrl), params, hops: [] };
  step(record);
  report.flow.resource = authorizationUrl.searchParams.get('resource') ?? undefined;
  report.flow.scopeRequested = authorizationUrl.searchParams.get('scope') ?? undefined;
  const target = new URL(redirectUri);
  let next = authorizationUrl;
  for (let hop = 0; hop < 20; hop++) {
    if (withoutQuery(next) === withoutQuery(target)) return next;
    const cookie = jar.header(next);
    const res = await fetch(next, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    jar.store(next, res.headers.getSetCookie());
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      const to = new URL(location, next);
      record.hops.push({ status: res.status, to: withoutQuery(to) });
      trace(`authorize: ${res.status} ${next.pathname} -> ${withoutQuery(to)}`);
      next = to;
      continue;
    }
    const text = await res.text().catch(() => '');
    record.hops.push({ status: res.status, body: text.slice(0, 500) });
    lastHttpError = { url: withoutQuery(next), status: res.status };
    throw Object.assign(new Error(`authorization stopped at ${withoutQuery(next)} with HTTP ${res.status}: ${text.slice(0, 200)}`), {
      status: res.status,
    });
  }
  throw new Error('authorization: more than 20 redirects');
}

// ---- the host's OAuth client provider (in memory) -------------------------------------------------

class MemoryOAuthProvider {
  callback; // URL the "browser" came back to
  #client;
  #tokens;
  #verifier;
  #discovery;
  #state;

  get redirectUrl() {
    return o.redirectUri;
  }

  get clientMetadata() {
    return {
      client_name: o.clientName,
      redirect_uris: [o.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...(o.scope !== undefined && { scope: o.scope }),
    };
  }

  state() {
    this.#state = randomBytes(16).toString('base64url');
    return this.#state;
  }

  expectedState() {
    return this.#state;
  }

  clientInformation() {
    return this.#client;
  }

  saveClientInformation(info) {
    this.#client = info;
  }

  tokens() {
    return this.#tokens;
  }

  saveTokens(tokens) {
    this.#tokens = tokens;
  }

  saveCodeVerifier(verifier) {
    this.#verifier = verifier;
  }

  codeVerifier() {
    if (!this.#verifier) throw new Error('no PKCE code verifier saved');
    return this.#verifier;
  }

  saveDiscoveryState(state) {
    this.#discovery = state;
  }

  discoveryState() {
    return this.#discovery;
  }

  invalidateCredentials(scope) {
    trace(`the SDK invalidates credentials: ${scope}`);
    if (scope === 'all' || scope === 'client') this.#client = undefined;
    if (scope === 'all' || scope === 'tokens') this.#tokens = undefined;
    if (scope === 'all' || scope === 'verifier') this.#verifier = undefined;
    if (scope === 'all' || scope === 'discovery') this.#discovery = undefined;
  }

  async redirectToAuthorization(authorizationUrl) {
    this.callback = await followAuthorization(authorizationUrl, o.redirectUri);
  }
}

// ---- the two SDKs -------------------------------------------------------------------------------

async function loadSdk() {
  if (o.sdk === 'v1') {
    const [{ Client }, { StreamableHTTPClientTransport }, { UnauthorizedError }] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
      import('@modelcontextprotocol/sdk/client/auth.js'),
    ]);
    return {
      makeClient: () => new Client({ name: o.clientName, version: '1.0.0' }, { capabilities: {} }),
      makeTransport: (authProvider) => new StreamableHTTPClientTransport(mcpUrl, { authProvider, fetch: recordingFetch }),
      isUnauthorized: (e) => e instanceof UnauthorizedError,
      finishAuth: (transport, callback) => transport.finishAuth(callback.searchParams.get('code')),
      protocolVersion: (client, transport) => transport.protocolVersion,
    };
  }
  const v2 = await import('@modelcontextprotocol/client');
  const mode = o.era === '2026' ? { pin: MODERN } : o.era === 'auto' ? 'auto' : 'legacy';
  return {
    makeClient: () =>
      new v2.Client({ name: o.clientName, version: '1.0.0' }, { capabilities: {}, versionNegotiation: { mode } }),
    makeTransport: (authProvider) => new v2.StreamableHTTPClientTransport(mcpUrl, { authProvider, fetch: recordingFetch }),
    isUnauthorized: (e) => {
      for (let x = e; x; x = x.cause) if (v2.UnauthorizedError.isInstance(x)) return true;
      return false;
    },
    finishAuth: (transport, callback) => transport.finishAuth(callback.searchParams),
    protocolVersion: (client) => client.getNegotiatedProtocolVersion(),
    era: (client) => client.getProtocolEra(),
  };
}

function errorJson(e) {
  const status = e?.status ?? e?.data?.status ?? (typeof e?.code === 'number' && e.code >= 400 && e.code < 600 ? e.code : undefined);
  return {
    name: e?.name ?? 'Error',
    message: e?.message ?? String(e),
    ...(e?.code !== undefined && { code: e.code }),
    ...(e?.errorCode !== undefined && { oauthError: e.errorCode }),
    ...(status !== undefined && { status }),
    ...(status === undefined && lastHttpError && { lastHttpError }),
  };
}

function finish(exitCode) {
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(exitCode);
}

// The host's redirect handler: the "browser" came back to the redirect URI; check it and hand
// the code to the SDK. Returns an error object, or undefined when the SDK has its tokens.
async function completeAuthorization(sdk, provider, transport) {
  const cb = provider.callback;
  provider.callback = undefined;
  const state = cb.searchParams.get('state');
  const stateOk = state !== null && state === provider.expectedState();
  step({
    step: 'callback',
    code: cb.searchParams.has('code'),
    state: state === null ? 'missing' : stateOk ? 'ok' : 'mismatch',
    ...(cb.searchParams.has('iss') && { iss: cb.searchParams.get('iss') }),
    ...(cb.searchParams.has('error') && {
      error: cb.searchParams.get('error'),
      errorDescription: cb.searchParams.get('error_description') ?? undefined,
    }),
  });
  if (cb.searchParams.has('error')) {
    return {
      name: 'AuthorizationError',
      message: `the authorization server answered ${cb.searchParams.get('error')}: ${cb.searchParams.get('error_description') ?? ''}`,
      oauthError: cb.searchParams.get('error'),
    };
  }
  if (!stateOk) return { name: 'StateMismatch', message: 'the callback state does not match the one sent' };
  try {
    await sdk.finishAuth(transport, cb);
  } catch (e) {
    return errorJson(e);
  }
  return undefined;
}

const MAX_AUTHORIZATIONS = 3; // the first one, then step-ups (403 insufficient_scope)

async function main() {
  const sdk = await loadSdk();
  const provider = new MemoryOAuthProvider();
  const timeout = { timeout: o.timeoutMs };
  let authorizations = 0;

  // Connect; whenever the SDK sent the "browser" off (UnauthorizedError after
  // redirectToAuthorization), finish that authorization and connect again with a new client and
  // transport, as a host does.
  let client;
  let transport;
  for (;;) {
    client = sdk.makeClient();
    transport = sdk.makeTransport(provider);
    try {
      await client.connect(transport, timeout);
      break;
    } catch (e) {
      await client.close().catch(() => {});
      if (!sdk.isUnauthorized(e) || !provider.callback || ++authorizations > MAX_AUTHORIZATIONS) {
        report.error = errorJson(e);
        return finish(3);
      }
      const failed = await completeAuthorization(sdk, provider, transport);
      if (failed) {
        report.error = failed;
        return finish(3);
      }
    }
  }

  if (!report.flow.unauthorized && !o.allowAnonymous) {
    report.error = { name: 'NoAuthorization', message: 'the server never answered 401 (use --allow-anonymous to accept that)' };
    await client.close().catch(() => {});
    return finish(3);
  }

  // A request on the open session that needs another authorization (step-up) is retried once
  // the host has finished it.
  const withReauthorization = async (request) => {
    for (;;) {
      try {
        return await request();
      } catch (e) {
        if (!sdk.isUnauthorized(e) || !provider.callback || ++authorizations > MAX_AUTHORIZATIONS) throw e;
        const failed = await completeAuthorization(sdk, provider, transport);
        if (failed) throw Object.assign(new Error(failed.message), failed);
      }
    }
  };

  report.protocolVersion = sdk.protocolVersion(client, transport);
  if (sdk.era) report.protocolEra = sdk.era(client);
  report.serverInfo = client.getServerVersion();
  let exitCode = 0;
  try {
    const { tools } = await withReauthorization(() => client.listTools(undefined, timeout));
    report.tools = tools.map((t) => t.name);
  } catch (e) {
    report.error = errorJson(e);
    exitCode = 1;
  }
  report.calls = [];
  for (const call of o.calls) {
    try {
      const result = await withReauthorization(() => client.callTool({ name: call.name, arguments: call.arguments }, undefined, timeout));
      const ok = !result.isError;
      report.calls.push({ name: call.name, ok, result });
      if (!ok) exitCode = 1;
    } catch (e) {
      report.calls.push({ name: call.name, ok: false, error: errorJson(e) });
      exitCode = 1;
    }
  }
  report.flow.authorizations = authorizations;
  await client.close().catch(() => {});
  report.ok = exitCode === 0;
  return finish(exitCode);
}

main().catch((e) => {
  report.error = errorJson(e);
  finish(3);
});
