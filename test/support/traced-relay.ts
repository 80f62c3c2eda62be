// `relay start` as ops run it for the tracing tests: a real process with JSON logs at the
// default level (info) unless told otherwise, a user, workspace, project, trusted domain and API
// key made by `relay setup`, a signed-in session, and the log lines it wrote, parsed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from './eventually.ts';
import { freePort, runRelay, spawnRelay, waitForReady, type RelayProcess } from './relay-process.ts';

export interface TracedRelay {
  relay: RelayProcess;
  base: string;
  env: Record<string, string>;
  inboundPort: number;
  setup: { apiKey: string; projectId: string; workspaceId: string; domain: string };
  cookie: string;
  /** Every JSON line the process wrote so far. */
  lines(): LogLine[];
  call(method: string, path: string, options?: { body?: unknown; key?: boolean; cookie?: boolean; headers?: Record<string, string> }): Promise<{ status: number; headers: Headers; body: any }>;
  close(): Promise<void>;
}

export type LogLine = Record<string, unknown> & { level: number; msg: string };

const PASSWORD = 'a long local password for tracing';

export async function startTracedRelay(options: { domain: string; env?: Record<string, string> }): Promise<TracedRelay> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-tracing-'));
  const [port, inboundPort] = [await freePort(), await freePort()];
  const base = `http://127.0.0.1:${port}`;
  const env = {
    RELAY_DATA_DIR: join(dir, 'data'), RELAY_LOG_FORMAT: 'json', RELAY_LOG_LEVEL: 'info',
    PORT: String(port), RELAY_INBOUND_SMTP_PORT: String(inboundPort), ...options.env,
  };
  const made = await runRelay(['setup', '--json', '--trust-domain', '--email', `owner@${options.domain}`, '--password', PASSWORD, '--domain', options.domain], { ...env, PORT: '0' });
  if (made.code !== 0) throw new Error(`relay setup failed: ${made.stderr}`);
  const setup = JSON.parse(made.stdout);
  const relay = spawnRelay(['start'], env);
  await waitForReady(base, relay, 60_000);
  const signIn = await fetch(`${base}/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: `owner@${options.domain}`, password: PASSWORD }) });
  if (signIn.status !== 200) throw new Error(`sign-in answered ${signIn.status}`);
  const cookie = signIn.headers.get('set-cookie')!.split(';')[0];
  const traced: TracedRelay = {
    relay, base, env, inboundPort, cookie,
    setup: { apiKey: setup.apiKey, projectId: setup.projectId, workspaceId: setup.workspaceId, domain: options.domain },
    lines: () => relay.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as LogLine),
    async call(method, path, o = {}) {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(o.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(o.key ? { authorization: `Bearer ${setup.apiKey}` } : {}),
          ...(o.cookie ? { cookie } : {}),
          ...o.headers,
        },
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
    },
    async close() {
      await relay.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return traced;
}

/** Waits until GET /v1/emails/:id answers an email that `done` accepts; returns it. */
export async function waitForEmailDetail(traced: TracedRelay, id: string, done: (email: any) => boolean, what: string, timeoutMs = 60_000): Promise<any> {
  let email: any = null;
  await waitUntil(async () => {
    const got = await traced.call('GET', `/v1/emails/${id}`, { key: true });
    email = got.body;
    return got.status === 200 && done(email);
  }, `${id} ${what}`, timeoutMs);
  return email;
}

/** The lines that name `value` in any field (a message, an id, a nested field). */
export const linesNaming = (lines: LogLine[], value: string): LogLine[] => lines.filter((line) => JSON.stringify(line).includes(value));
