// The pinned v2 MCP TypeScript packages (@modelcontextprotocol/client and
// @modelcontextprotocol/server, which speak protocol revision 2026-07-28 as well as the 2025
// revisions), re-exported for scripts that live outside tests/node.
//
// Same reason as sdk.mjs: a script in tests/fixtures/ cannot resolve tests/node/node_modules by
// itself, so it imports this file and stays on the versions tests/node/package-lock.json pins.
// v1 (@modelcontextprotocol/sdk, re-exported by sdk.mjs) and v2 live side by side; they share
// no classes, so never hand an object of one to the other.
import { readFile } from 'node:fs/promises';
import http from 'node:http';

export * as client from '@modelcontextprotocol/client';
export { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
export * as server from '@modelcontextprotocol/server';
export { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';

/** The installed versions of the v2 packages, for the scripts' start-up lines. */
export async function versions() {
  const read = async (name) =>
    JSON.parse(await readFile(new URL(`./node_modules/@modelcontextprotocol/${name}/package.json`, import.meta.url), 'utf8'))
      .version;
  return { client: await read('client'), server: await read('server') };
}

/**
 * A Node `http.Server` in front of a web-standard handler (`(Request) => Promise<Response>`, the
 * shape of `createMcpHandler(...).fetch` and of the v2 transports' `handleRequest`), so the
 * scripts need no extra adapter package. The request body is read whole before the handler
 * runs (MCP bodies are small); the response body is streamed as the handler produces it, and
 * when the HTTP client goes away the handler's request signal aborts and its response stream is
 * cancelled, which is how an SSE stream (a `subscriptions/listen`) learns that its client left.
 */
export function createFetchServer(handle, { onError = (e) => console.error(e) } = {}) {
  return http.createServer(async (req, res) => {
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    let reader;
    try {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const headers = new Headers();
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
      let url;
      try {
        url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`);
      } catch {
        url = new URL(req.url ?? '/', 'http://localhost');
      }
      const hasBody = !['GET', 'HEAD'].includes(req.method ?? 'GET');
      const request = new Request(url, {
        method: req.method,
        headers,
        ...(hasBody && { body: Buffer.concat(chunks) }),
        signal: abort.signal,
      });
      const response = await handle(request);
      res.statusCode = response.status;
      response.headers.forEach((value, name) => res.setHeader(name, value));
      if (!response.body) {
        res.end();
        return;
      }
      res.flushHeaders();
      reader = response.body.getReader();
      res.on('close', () => void reader.cancel().catch(() => {}));
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        res.write(value);
      }
      res.end();
    } catch (e) {
      if (abort.signal.aborted) return; // the client left; nobody to answer
      onError(e);
      if (!res.headersSent) {
        res.writeHead(500, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal server error' } }));
      } else {
        res.destroy();
      }
    }
  });
}

/** Listens on host:port (0 = any free port) and resolves with the bound port. */
export function listen(server, host, port) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address().port);
    });
  });
}
