// The dashboard: Relay in the browser, served by the API process. The server sends one shell
// page for every dashboard address and the browser modules in client/ (TypeScript, types
// stripped by Node itself: no bundler, no build step); the modules then talk to Relay's own
// HTTP API like any other client. docs/dashboard.md: structure, adding a page, the headers.
import { createHash } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import { stripTypeScriptTypes } from 'node:module';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RATE_DEFINITIONS } from '../../domain/deliverability/rates.ts';
import { STATUSES } from '../../domain/email/status.ts';
import { canGrantRole, canManageSuppressions, canWrite, PERMISSIONS, ROLES } from '../../domain/management.ts';
import { WEBHOOK_EVENT_TYPES } from '../../domain/webhooks/events.ts';
import type { RelayConfig } from '../../infra/config.ts';
import { DEFAULT_LIMITS } from '../api/connection-limits.ts';
import { PAGES } from './client/route-table.ts';

/**
 * If-None-Match compared as RFC 9110 13.1.2 asks, weakly: a proxy that compresses the asset (nginx
 * `gzip_proxied`) hands the browser `W/"…"`, and a list or `*` may come too.
 */
function notModified(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((tag) => {
    const candidate = tag.trim();
    return candidate === '*' || candidate.replace(/^W\//, '') === opaque;
  });
}

/** Where the assets are read from: the browser modules' directory and the stylesheet. */

export interface AssetSources { clientDir: string; stylesheet: string }

const SOURCES: AssetSources = {
  clientDir: fileURLToPath(new URL('./client/', import.meta.url)),
  stylesheet: fileURLToPath(new URL('./dashboard.css', import.meta.url)),
};

/**
 * The pages' policy: scripts only from this origin (no inline script, no eval), API calls only
 * to it, frames only of this origin, and never framed themselves. Inline styles are allowed for
 * one reason: a template's live preview is framed with srcdoc, and a srcdoc frame inherits this
 * policy, so without them the preview would not look as the mail will (pages themselves set no
 * inline style: the preview frame is sandboxed and runs no script either way).
 */
export const PAGE_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:", "connect-src 'self'",
  "frame-src 'self'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'",
].join('; ');

export const PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': PAGE_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
};

/**
 * Where the shell is served: every page of client/route-table.ts, and the two addresses that
 * lead to one (the dashboard's home, a workspace's home: client/main.ts).
 */
/** The modules and the stylesheet: client/ and client/pages/ are two levels, so two routes (no wildcard). */
export const ASSET_PATHS = ['/assets/:file', '/assets/pages/:file'];

export const PAGE_PATHS = ['/', '/workspaces/:workspaceId', ...PAGES.map((page) => page.path)];

/**
 * The first path segments of Relay's machine interface, never a dashboard address: the API and
 * its documents (/v1/openapi.json, /v1/asyncapi.json), health, readiness and metrics, and the
 * root /openapi.json a client may guess.
 */
const MACHINE_SEGMENTS = new Set(['v1', 'healthz', 'readyz', 'metrics', 'openapi.json', 'asyncapi.json']);

function firstSegment(url: string): string {
  const segment = url.split('?')[0].split('/')[1] ?? '';
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * Whether a request no route serves is a person's browser opening an address of the dashboard
 * that is no page (a mistyped or outdated link): a navigation (Sec-Fetch-Dest: document) outside
 * the machine interface. API clients, fetches and module loads send another destination or none.
 */
export const isPageNavigation = (request: FastifyRequest): boolean =>
  request.method === 'GET' && request.headers['sec-fetch-dest'] === 'document' && !MACHINE_SEGMENTS.has(firstSegment(request.url));

/** How the dashboard answers a request no route serves, when it answers it (else undefined). */
export type UnknownAddressAnswer = (request: FastifyRequest, reply: FastifyReply) => FastifyReply | undefined;

/**
 * What the pages need to know of Relay's rules, decided here from domain/ so that each rule
 * keeps its one place: the statuses and event types to filter by, the statuses after which an
 * email's page stops following it, what each role may do, what each deliverability rate counts,
 * and how long a request may wait for its answer (the API's idle timeout: it closes a connection
 * silent for longer, so no answer comes after it).
 */
export function dashboardSettings(config: Pick<RelayConfig, 'dashboardOrigin' | 'env'>) {
  return {
    dashboardOrigin: config.dashboardOrigin,
    statuses: [...STATUSES],
    webhookEvents: [...WEBHOOK_EVENT_TYPES],
    permissions: [...PERMISSIONS],
    rates: RATE_DEFINITIONS,
    requestDeadlineMs: DEFAULT_LIMITS.idleTimeoutMs,
    roles: Object.fromEntries(ROLES.map((role) => [role, {
      write: canWrite(role),
      suppressions: canManageSuppressions(role),
      grants: ROLES.filter((granted) => canGrantRole(role, granted)),
    }])),
  };
}

/** JSON inside a <script type="application/json">: nothing in it can close the element. */
const inertJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');

function shellOf(config: Pick<RelayConfig, 'dashboardOrigin' | 'env'>): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Relay</title>
<link rel="stylesheet" href="/assets/dashboard.css">
<script type="module" src="/assets/main.ts"></script>
</head>
<body>
<div id="app"><p class="loading">Loading…</p></div>
<script type="application/json" id="relay-settings">${inertJson(dashboardSettings(config))}</script>
</body>
</html>
`;
}

interface Asset { body: string; type: string; etag: string }

/**
 * Node marks stripTypeScriptTypes experimental and warns once per process; the modules it
 * strips are the dashboard's own and the browser tests load every one of them.
 */
function stripTypes(source: string): string {
  const emit = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    if (!String(warning).includes('stripTypeScriptTypes')) (emit as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return stripTypeScriptTypes(source, { mode: 'strip' });
  } finally {
    process.emitWarning = emit;
  }
}

async function listModules(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(entries.map(async (entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return listModules(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  }));
  return nested.flat();
}

/** The assets by URL path: each module as JavaScript (its .ts name kept, so imports resolve as written) and the stylesheet. */
async function loadAssets({ clientDir, stylesheet }: AssetSources): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  const add = (path: string, body: string, type: string) =>
    assets.set(path, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
  for (const file of await listModules(clientDir)) {
    add(`/assets/${relative(clientDir, file).split(sep).join('/')}`, stripTypes(await readFile(file, 'utf8')), 'text/javascript; charset=utf-8');
  }
  add('/assets/dashboard.css', await readFile(stylesheet, 'utf8'), 'text/css; charset=utf-8');
  return assets;
}

/**
 * `sources`: where the assets are read from (tests serve a copy they can break and mend).
 * Returns the answer to a browser's navigation to an address that is no page (isPageNavigation):
 * 404 with the page shell, whose script draws the dashboard's "Page not found" with a link back,
 * for the server's not-found handler to give (apps/api/error-registry.ts); every other request no
 * route serves keeps the API's JSON envelope.
 */
export async function dashboardRoutes(app: FastifyInstance, config: Pick<RelayConfig, 'dashboardOrigin' | 'env'>, sources: AssetSources = SOURCES): Promise<UnknownAddressAnswer> {
  const shell = shellOf(config);
  // Loaded on first use: processes that never serve a page never read or strip the modules.
  let assets: Promise<Map<string, Asset>> | null = null;
  // Only a load that worked is kept: a failed one (a file mid-replacement, descriptors
  // running out) is the requests' failure, and the next request reads again.
  const loaded = () => (assets ??= loadAssets(sources).catch((error: unknown) => {
    assets = null;
    throw error;
  }));
  const secured = (reply: FastifyReply) => reply.headers(PAGE_HEADERS);

  const sendShell = (reply: FastifyReply) => secured(reply).header('cache-control', 'no-cache').type('text/html; charset=utf-8').send(shell);
  for (const path of PAGE_PATHS) {
    app.get(path, async (_request, reply) => sendShell(reply));
  }

  const serveAsset = async (path: string, reply: FastifyReply) => {
    const asset = (await loaded()).get(path);
    if (!asset) return reply.callNotFound();
    // Revalidated on every load (a new release is picked up at once) but sent again only when changed.
    secured(reply).header('cache-control', 'no-cache').header('etag', asset.etag);
    if (notModified(reply.request.headers['if-none-match'], asset.etag)) return reply.status(304).send();
    return reply.type(asset.type).send(asset.body);
  };
  for (const path of ASSET_PATHS) {
    app.get<{ Params: { file: string } }>(path, async (request, reply) => serveAsset(path.replace(':file', request.params.file), reply));
  }
  // Either answer depends on Sec-Fetch-Dest: a cache must not give one to a request of another destination.
  return (request, reply) => {
    reply.header('vary', 'Sec-Fetch-Dest');
    return isPageNavigation(request) ? sendShell(reply.status(404)) : undefined;
  };
}
