// A webhook's `data.reason` holds well-formed Unicode however the reply it quotes is cut: an
// SMTP reply in UTF-8 with characters outside the BMP (an emoji, many CJK ideographs) cut at
// 1,000 UTF-16 units keeps no half of a pair (cutText, domain/text.ts). A lone surrogate would
// reach the body JSON-escaped (`\ud83d`), and a receiver written from docs/webhooks.md in Python's
// standard library, which verifies the signature and parses the body, could not commit it
// (sqlite3: "surrogates not allowed"), so it would answer 500 until the event was lost (RFC 7493
// 2.1; the contract's Events, delivery rule 1: commit, then acknowledge). Anyone controlling a
// reply's text, any recipient's MX among them, could trigger it.
//
// Two cuts, each reached here: the outcome's reason (domain/email/outcomes.ts, REASON_LIMIT), by
// an `email.rejected` whose reason is "provider_rejected; " plus the reply; and the recorded reply
// itself (apps/services/delivery/attempt.ts), by an `email.delayed` whose reason is the reply alone.
import { spawn, type ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as assert from 'uvu/assert';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort } from './support/free-port.ts';
import { makeTestCa, trustTestCa, type TestCa } from './support/https-receiver.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { smtpError, startSmtpSink, type DataAnswer, type SmtpSink } from './support/smtp-sink.ts';

const missing = await promisify(execFile)('python3', ['--version']).then(() => undefined, () => 'python3 is not installed');

const HOST = 'hooks.relay.test';

// A receiver as docs/webhooks.md describes it, with Python's standard library only: HMAC-SHA256
// keyed with the literal secret over Relay-Timestamp + "." + the raw body, compared in constant
// time with the hex after "v1=", 300 s of skew at most; verify before parsing; commit the event
// durably (sqlite3, deduplicated on its id), then answer 2xx. It prints one JSON line per request.
const RECEIVER = String.raw`
import base64, hashlib, hmac, json, os, sqlite3, ssl, time
from http.server import HTTPServer, BaseHTTPRequestHandler

SECRET = os.environ['RELAY_WEBHOOK_SECRET'].encode('utf-8')
db = sqlite3.connect(os.environ['DB'])
db.execute('create table if not exists events (id text primary key, type text, body text)')

def verify(headers, raw):
    timestamp = headers.get('Relay-Timestamp', '')
    signature = headers.get('Relay-Signature', '')
    if not timestamp.isdigit() or not signature.startswith('v1='):
        return False
    if abs(time.time() - int(timestamp)) > 300:
        return False
    expected = hmac.new(SECRET, timestamp.encode('ascii') + b'.' + raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature[3:])

class Receiver(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers['Content-Length']))
        line = {'eventId': self.headers.get('Relay-Event-Id'), 'raw': base64.b64encode(raw).decode('ascii'), 'verified': verify(self.headers, raw)}
        status = 400
        if line['verified']:
            try:
                event = json.loads(raw)
                db.execute('insert or ignore into events values (?, ?, ?)', (event['id'], event['type'], json.dumps(event, ensure_ascii=False)))
                db.commit()
                status = 204
            except Exception as error:
                line['error'] = repr(error)[:300]
                status = 500
        line['status'] = status
        print(json.dumps(line), flush=True)
        self.send_response(status)
        self.end_headers()

server = HTTPServer(('127.0.0.1', int(os.environ['PORT'])), Receiver)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.environ['TLS_CERT'], os.environ['TLS_KEY'])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(json.dumps({'listening': server.server_address[1]}), flush=True)
server.serve_forever()
`;

interface ReceiverLine { eventId: string; raw: string; verified: boolean; status: number; error?: string }

interface Context {
  ca: TestCa;
  dir: string;
  dns: TestDnsServer;
  sink: SmtpSink;
  answers: DataAnswer[];
  t: TestApp;
  tenant: DeliveryTenant;
  receiver: ChildProcess;
  output: string;
}

const test = skippableSuite<Context>('a webhook reason cut in the middle of a character, at a Python receiver', missing);

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-python-receiver-'));
  const cert = ctx.ca.issue([HOST]);
  writeFileSync(join(ctx.dir, 'cert.pem'), cert.cert);
  writeFileSync(join(ctx.dir, 'key.pem'), cert.key);
  writeFileSync(join(ctx.dir, 'receiver.py'), RECEIVER);
  const port = await freePort();
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.answers = [];
  ctx.sink = await startSmtpSink({ onData: () => ctx.answers.shift() ?? {} });
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_WEBHOOK_ALLOW: `${HOST}:${port}`,
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns.setZone([{ name: HOST, type: 'A', data: '127.0.0.1' }, ...ctx.tenant.zone]);
  const { secret } = await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets,
    { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow },
    { workspaceId: ctx.tenant.workspaceId, projectId: ctx.tenant.projectId, url: `https://${HOST}:${port}/relay`, events: ['email.rejected', 'email.delayed'] }, new Date());
  ctx.output = '';
  ctx.receiver = spawn('python3', [join(ctx.dir, 'receiver.py')], {
    env: { ...process.env, RELAY_WEBHOOK_SECRET: secret, TLS_CERT: join(ctx.dir, 'cert.pem'), TLS_KEY: join(ctx.dir, 'key.pem'), PORT: String(port), DB: join(ctx.dir, 'events.sqlite') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  ctx.receiver.stdout!.on('data', (chunk) => (ctx.output += chunk));
  ctx.receiver.stderr!.on('data', (chunk) => (ctx.output += chunk));
  await waitUntil(() => {
    if (ctx.receiver.exitCode !== null) throw new Error(`the receiver exited: ${ctx.output}`);
    return ctx.output.includes('"listening"');
  }, 'the Python receiver listens');
});

test.after(async (ctx) => {
  if (ctx.receiver && ctx.receiver.exitCode === null) {
    const exited = new Promise((resolve) => ctx.receiver.once('exit', resolve));
    ctx.receiver.kill();
    await exited;
  }
  await ctx.t?.close();
  await ctx.sink?.close();
  await ctx.dns?.close();
  ctx.ca?.remove();
  if (ctx.dir) rmSync(ctx.dir, { recursive: true, force: true });
});

const lines = (ctx: Context): ReceiverLine[] =>
  ctx.output.split('\n').filter((l) => l.startsWith('{"eventId"')).map((l) => JSON.parse(l) as ReceiverLine);

/** Sends one email, and waits for the receiver's first request about it and for that attempt's record. */
async function firstRequest(ctx: Context, type: string): Promise<{ line: ReceiverLine; event: { data: { reason: string } }; attempt: { httpStatus: number | null } }> {
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'carol@example.org', subject: 'Hello', text: 'hi' });
  const about = () => lines(ctx).filter((l) => l.eventId.endsWith(`_${type.split('.')[1]}`) && Buffer.from(l.raw, 'base64').toString('utf8').includes(id));
  await waitUntil(() => about().length > 0, `the receiver gets the ${type} event of ${id}`);
  await waitUntil(async () => (await detail(ctx.t, ctx.tenant.key, id)).webhookDeliveries.some((d: { attemptLogs: unknown[] }) => d.attemptLogs.length > 0), 'the attempt is recorded');
  const line = about()[0];
  const delivery = (await detail(ctx.t, ctx.tenant.key, id)).webhookDeliveries.find((d: { eventId: string }) => d.eventId === line.eventId);
  return { line, event: JSON.parse(Buffer.from(line.raw, 'base64').toString('utf8')), attempt: delivery.attemptLogs.at(-1) };
}

test('email.rejected: a 554 reply of emoji; the reason "provider_rejected; 554 …" is cut at 1,000 code units, between the halves of one', async (ctx) => {
  ctx.answers.push({ error: smtpError(554, `5.7.1 ${'😀'.repeat(600)}`) });
  const { line, event, attempt } = await firstRequest(ctx, 'email.rejected');
  assert.ok(line.verified, 'the signature verifies as the docs describe');
  assert.ok(event.data.reason.startsWith('provider_rejected; 554 5.7.1 😀'), event.data.reason.slice(0, 40));
  assert.ok(event.data.reason.isWellFormed(), `data.reason ends in a lone surrogate: …${JSON.stringify(event.data.reason.slice(-3))}`);
  assert.is(line.error, undefined, `the receiver could not commit the event: ${line.error}`);
  assert.is(attempt.httpStatus, 204, 'the receiver acknowledged the first attempt');
});

test('email.delayed: a 451 reply of emoji; the recorded reply itself is cut at 1,000 code units, between the halves of one', async (ctx) => {
  // "451 4.3.0 x" is 11 code units: the 1,000th is the first half of an emoji.
  ctx.answers.push({ error: smtpError(451, `4.3.0 x${'😀'.repeat(600)}`) });
  const { line, event, attempt } = await firstRequest(ctx, 'email.delayed');
  assert.ok(line.verified, 'the signature verifies as the docs describe');
  assert.ok(event.data.reason.startsWith('451 4.3.0 x😀'), event.data.reason.slice(0, 40));
  assert.ok(event.data.reason.isWellFormed(), `data.reason ends in a lone surrogate: …${JSON.stringify(event.data.reason.slice(-3))}`);
  assert.is(line.error, undefined, `the receiver could not commit the event: ${line.error}`);
  assert.is(attempt.httpStatus, 204, 'the receiver acknowledged the first attempt');
});

test.run();
