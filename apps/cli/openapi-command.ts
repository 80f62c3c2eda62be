// `relay openapi [--out FILE]`: the HTTP API's OpenAPI 3.1 document, exactly as GET
// /v1/openapi.json serves it. `npm run openapi` writes it to apps/api/openapi.json, where it is
// committed (test/openapi.int.test.ts fails when the two differ).
import { renameSync, writeFileSync } from 'node:fs';
import { loadConfig } from '../../infra/config.ts';
import type { ApiContext } from '../api/context.ts';
import { serializeDocument, type OpenApiDocument } from '../api/openapi.ts';
import { buildApi } from '../api/server.ts';
import { createRelayMetrics } from '../relay-metrics.ts';
import type { Services } from '../services/services.ts';
import { asksForHelp, EXIT_USAGE, parseOrExplain } from './command.ts';

const USAGE = 'usage: relay openapi [--out FILE]   print (or write to FILE) the OpenAPI 3.1 document of the HTTP API';

/**
 * The document of the routes as `relay api` declares them. Nothing is opened: routes are only
 * declared, no request reaches a handler, so the context holds no stores; the configuration is
 * the defaults, so the document does not depend on the environment it is generated in.
 */
export async function generateOpenApiDocument(): Promise<OpenApiDocument> {
  const unused = new Proxy({}, { get: (_target, name) => (name === 'then' ? undefined : unusedMember(String(name))) });
  const ctx = {
    config: loadConfig({}),
    events: unused,
    documents: unused,
    services: unused as Services,
    now: () => new Date(),
    readiness: async () => ({ checks: {}, parts: {} }),
    metrics: createRelayMetrics(),
  } as ApiContext;
  const app = await buildApi(ctx, { logLevel: false });
  try {
    await app.ready();
    const response = await app.inject({ method: 'GET', url: '/v1/openapi.json' });
    if (response.statusCode !== 200) throw new Error(`GET /v1/openapi.json answered ${response.statusCode}: ${response.body}`);
    return response.json() as OpenApiDocument;
  } finally {
    await app.close();
  }
}

/** Route plugins may keep references to the stores while registering; they must not use them. */
const unusedMember = (name: string) => () => {
  throw new Error(`relay openapi: ${name}() was called while only declaring routes`);
};

export async function openapi(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  const parsed = parseOrExplain(args, { out: { type: 'string' } }, USAGE);
  if (!parsed) return EXIT_USAGE;
  if (parsed.positionals.length > 0) {
    console.error(`relay: unexpected argument ${JSON.stringify(parsed.positionals[0])}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  if (parsed.values.out === '') {
    console.error(`relay: --out needs a file name\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const out = parsed.values.out ?? null;
  const text = serializeDocument(await generateOpenApiDocument());
  if (out === null) {
    process.stdout.write(text);
    return 0;
  }
  // Written whole or not at all: a failed run leaves the committed document as it was.
  writeFileSync(`${out}.tmp`, text);
  renameSync(`${out}.tmp`, out);
  console.error(`wrote ${out}`);
  return 0;
}
