// The pinned @modelcontextprotocol/sdk, re-exported for scripts that live outside tests/node.
//
// ES module imports resolve bare specifiers from the importing file's folder upwards, so a
// script in tests/fixtures/ cannot find tests/node/node_modules by itself (NODE_PATH does not
// apply to `import`). Importing this file instead keeps every script on the one SDK that
// tests/node/package-lock.json pins, through the package's own export map.
export { Server } from '@modelcontextprotocol/sdk/server/index.js';
export { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
export { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
export { Client } from '@modelcontextprotocol/sdk/client/index.js';
export { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
export { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
export * as types from '@modelcontextprotocol/sdk/types.js';
