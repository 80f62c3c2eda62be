// No secret reaches a log. `relay start` runs as a real process at debug level (JSON lines,
// stdout not being a terminal) through a whole lifecycle: setup on the CLI, sign-in, a
// template created and previewed, a direct send and a template send with bodies and a BCC,
// delivery through an SMTP smarthost that requires a password, the webhook to an HTTPS
// receiver on localhost, a bounce report through the inbound SMTP server, sign-out. Then
// everything the processes wrote (the server's stdout and stderr, the CLI's stderr) is
// searched for each secret that passed through: the API key, the session cookies, the
// password, the smarthost's password, the whsec_ signing secret, Relay's own key, the domain's
// DKIM private key, and the bodies (text, HTML, template and variables) and the BCC address.
// The same output shows that every request line names method, route pattern, status,
// duration and request id, and /metrics counts the bounce report by what it found.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { dkimPrivateKeyOf } from '../apps/services/dkim-key-vault.ts';
import type { SendingDomain } from '../domain/management.ts';
import { loadConfig } from '../infra/config.ts';
import { SecretBox, loadSecretKeys } from '../infra/secrets/secret-box.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { freePort, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { scrape, sumOf } from './support/metrics.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const DOMAIN = 'secrets.example.test';

interface Context {
  dir: string;
  ca: TestCa;
  sink: SmtpSink;
  receiver: HttpsReceiver;
  relay: RelayProcess;
  base: string;
  env: Record<string, string>;
  /** Whatever the CLI wrote for people (its stderr); its stdout is its result, secrets included by design. */
  cliLogs: string;
  secrets: Map<string, string>;
}

const test = suite<Context>('nothing secret in the logs');

const marker = (what: string) => `${what}-${randomBytes(9).toString('base64url')}`;

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-log-secrets-'));
  ctx.secrets = new Map();
  ctx.ca = makeTestCa();
  const smtpPassword = marker('smtp-pass');
  ctx.secrets.set('the smarthost password', smtpPassword);
  ctx.sink = await startSmtpSink({ auth: { user: 'relay', pass: smtpPassword } });
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue(['localhost']));
  const secretKey = randomBytes(32).toString('base64');
  ctx.secrets.set('RELAY_SECRET_KEY', secretKey);
  const [port, inbound] = [await freePort(), await freePort()];
  ctx.base = `http://127.0.0.1:${port}`;
  ctx.env = {
    RELAY_DATA_DIR: join(ctx.dir, 'data'),
    RELAY_SECRET_KEY: secretKey,
    RELAY_LOG_LEVEL: 'debug',
    PORT: String(port),
    RELAY_INBOUND_SMTP_PORT: String(inbound),
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://relay:${encodeURIComponent(smtpPassword)}@127.0.0.1:${ctx.sink.port}?tls=none`,
    RELAY_WEBHOOK_ALLOW: `localhost:${ctx.receiver.port}`,
    NODE_EXTRA_CA_CERTS: ctx.ca.caFile,
  };
  ctx.cliLogs = '';
});

test.after(async (ctx) => {
  await ctx.relay?.stop();
  await ctx.sink.close();
  await ctx.receiver.close();
  ctx.ca.remove();
  rmSync(ctx.dir, { recursive: true, force: true });
});

async function call(ctx: Context, method: string, path: string, options: { body?: unknown; cookie?: string; key?: string } = {}) {
  const response = await fetch(`${ctx.base}${path}`, {
    method,
    headers: {
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(options.cookie ? { cookie: options.cookie } : {}),
      ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
}

test('a whole lifecycle at debug level logs none of the secrets and bodies that passed through', async (ctx) => {
  const password = marker('pw-a-long-local-password');
  ctx.secrets.set('the user\'s password', password);
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'owner@secrets.test', '--password', password, '--domain', DOMAIN], { ...ctx.env, PORT: '0' });
  assert.is(setup.code, 0, setup.stderr);
  ctx.cliLogs += setup.stderr;
  const out = JSON.parse(setup.stdout);
  ctx.secrets.set('the API key', out.apiKey);
  ctx.secrets.set('the API key without its prefix', out.apiKey.replace(/^rr_(test|live)_/, ''));
  ctx.secrets.set('the session cookie setup made', out.sessionCookie.split('=')[1]);

  ctx.relay = spawnRelay(['start'], { ...ctx.env, RELAY_LOG_LEVEL: 'debug' });
  await waitForReady(ctx.base, ctx.relay, 60_000);

  // Sign-in; the cookie's token is a secret.
  const signIn = await call(ctx, 'POST', '/v1/session', { body: { email: 'owner@secrets.test', password } });
  assert.is(signIn.status, 200, JSON.stringify(signIn.body));
  const cookie = signIn.headers.get('set-cookie')!.split(';')[0];
  ctx.secrets.set('the session cookie sign-in made', cookie.split('=')[1]);
  const wrong = await call(ctx, 'POST', '/v1/session', { body: { email: 'owner@secrets.test', password: `${password}-wrong` } });
  assert.is(wrong.status, 401);
  ctx.secrets.set('a wrong password', `${password}-wrong`);

  // The endpoint; its signing secret is shown once.
  const endpoint = await call(ctx, 'POST', `/v1/projects/${out.projectId}/webhook-endpoints`, {
    cookie, body: { url: `https://localhost:${ctx.receiver.port}/hook`, events: ['email.sent', 'email.bounced'] },
  });
  assert.is(endpoint.status, 201, JSON.stringify(endpoint.body));
  ctx.secrets.set('the whsec_ signing secret', endpoint.body.secret);

  // A template, previewed with variables, then sent.
  const templateBody = marker('template-body');
  const variable = marker('variable-value');
  ctx.secrets.set('a template body', templateBody);
  ctx.secrets.set('a variable\'s value', variable);
  const created = await call(ctx, 'POST', `/v1/templates?projectId=${out.projectId}`, {
    cookie, body: { name: 'Welcome', slug: 'welcome', subject: 'Welcome', text: `${templateBody} {{name}}`, html: `<p>${templateBody} {{name}}</p>` },
  });
  assert.is(created.status, 201, JSON.stringify(created.body));
  const preview = await call(ctx, 'POST', `/v1/templates/preview?projectId=${out.projectId}`, {
    cookie, body: { subject: 'Hi {{name}}', text: `${templateBody} {{name}}`, variables: { name: variable } },
  });
  assert.is(preview.status, 200, JSON.stringify(preview.body));

  const text = marker('text-body');
  const html = marker('html-body');
  const bcc = `${marker('hidden').toLowerCase().replace(/[^a-z0-9-]/g, '')}@${DOMAIN}`;
  ctx.secrets.set('a text body', text);
  ctx.secrets.set('an HTML body', html);
  ctx.secrets.set('a BCC address', bcc);
  const direct = await call(ctx, 'POST', '/v1/emails', {
    key: out.apiKey, body: { from: `hello@${DOMAIN}`, to: `ann@${DOMAIN}`, bcc, subject: 'Direct', text, html: `<p>${html}</p>` },
  });
  assert.is(direct.status, 202, JSON.stringify(direct.body));
  const templated = await call(ctx, 'POST', '/v1/emails', {
    key: out.apiKey, body: { from: `hello@${DOMAIN}`, to: `bob@${DOMAIN}`, template: 'welcome', variables: { name: variable } },
  });
  assert.is(templated.status, 202, JSON.stringify(templated.body));
  const unauthorized = await call(ctx, 'POST', '/v1/emails', { key: `${out.apiKey.slice(0, -4)}AAAA`, body: {} });
  assert.is(unauthorized.status, 401);

  // Delivered through the smarthost, which required the password.
  await waitUntil(() => ctx.sink.messages.length >= 3, 'the smarthost received both messages (the BCC one apart)', 60_000);
  const toAnn = ctx.sink.messages.find((m) => m.rcptTo.some((r) => r.address === `ann@${DOMAIN}`))!;
  assert.ok(toAnn.raw.toString().includes(text), 'the body really went out');

  // A bounce for Ann through the feedback server, to the return path the message carried.
  const returnPath = (toAnn.mailFrom as { address: string }).address;
  await deliverReport(Number(ctx.env.RELAY_INBOUND_SMTP_PORT), returnPath, dsn({ recipient: `ann@${DOMAIN}`, action: 'failed', status: '5.1.1', envelopeId: direct.body.id }));
  await waitUntil(() => ctx.receiver.requests.some((r) => r.body.includes('"email.bounced"')), 'the receiver got email.bounced', 60_000);
  assert.ok(ctx.receiver.requests.some((r) => r.body.includes('"email.sent"')), 'and email.sent');

  assert.is((await call(ctx, 'DELETE', '/v1/session', { cookie })).status, 200);
  // The report is counted by what it found and did.
  const samples = await scrape(ctx.base);
  assert.is(sumOf(samples, 'relay_feedback_reports_total', { kind: 'hard_bounced', effect: 'recorded' }), 1);
  await ctx.relay.stop();

  // The domain's DKIM private key, as Relay keeps it (sealed with the key set above).
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: ctx.env.RELAY_DATA_DIR, RELAY_LOG_LEVEL: 'silent' }));
  try {
    const box = new SecretBox(await loadSecretKeys({ dataDir: ctx.env.RELAY_DATA_DIR, secretKey: ctx.env.RELAY_SECRET_KEY }));
    const [domain] = await stores.documents.collection<SendingDomain>('domains').find({ where: { name: DOMAIN } });
    const pem = dkimPrivateKeyOf(domain, box);
    const body = pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
    // Any 24 characters of the key's base64 would be a leak; checking its 64-character lines and a few slices covers it.
    pem.split('\n').filter((line) => line.length >= 40 && !line.startsWith('-----')).forEach((line, i) => ctx.secrets.set(`DKIM private key line ${i + 1}`, line));
    for (let at = 0; at + 24 <= body.length; at += 200) ctx.secrets.set(`DKIM private key at ${at}`, body.slice(at, at + 24));
  } finally {
    await stores.close();
  }

  const logged = ctx.relay.output() + ctx.cliLogs;
  writeFileSync(join(ctx.dir, 'logged.txt'), logged);
  const parsed = ctx.relay.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
  assert.ok(parsed.length > 30, `${parsed.length} lines logged`);
  assert.ok(parsed.some((line) => line.level === 20), 'debug lines among them');
  const leaks = [...ctx.secrets].filter(([, secret]) => logged.includes(secret)).map(([what]) => what);
  assert.equal(leaks, [], `secrets found in the logs: ${leaks.join(', ')}`);

  // Every request line: method, route pattern, status, duration, request id.
  const requests = parsed.filter((line) => line.msg === 'request');
  assert.ok(requests.length >= 8, `request lines: ${requests.length}`);
  for (const line of requests) {
    assert.type(line.method, 'string');
    assert.type(line.route, 'string');
    assert.type(line.status, 'number');
    assert.type(line.durationMs, 'number');
    assert.match(line.requestId, /^[0-9a-f-]{36}$/);
  }
  const sends = requests.filter((line) => line.method === 'POST' && line.route === '/v1/emails');
  assert.equal(sends.map((line) => line.status).sort(), [202, 202, 401]);
  assert.ok(requests.some((line) => line.route === '/v1/templates/preview' && line.status === 200));
});

test.run();
