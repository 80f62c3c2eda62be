// The floor of a durable admission on Relay's stack: fastify with a JSON schema, node:sqlite,
// node:crypto, and nothing of Relay's. It does the work every admission has to do, written as
// plainly as it can be: the key looked up by its hash, the body validated, the sender domain and
// the recipients' suppressions read, a keyed fingerprint of the body, the content sealed
// (AES-256-GCM) with a key of the email's own, and four rows written (a rate slot, the content
// key, the charge, the event) in a transaction shared with the other requests of the event-loop
// turn, answered once the write-ahead log is synced (COMMIT, then fdatasync on libuv's pool, as
// infra/sqlite/group-commit.ts does). No idempotency, quota arithmetic, flow control, metrics or
// logging. It is a reference for what the bare route's 0.1× asks of admission here, not a way
// to run Relay (test/bench/admission.bench.ts, BENCH_FLOOR=1).
import { createCipheriv, createHash, createHmac, createSecretKey, randomBytes } from 'node:crypto';
import { fdatasync, openSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Type } from '@sinclair/typebox';
import Fastify from 'fastify';

export const FLOOR_WORKSPACES = 40;
export const floorKey = (workspace: number) => `floor-key-${workspace}`;
export const floorDomain = (workspace: number) => `w${workspace}.floor.test`;

const Mailbox = Type.String({ minLength: 3, maxLength: 998 });
const Mailboxes = Type.Union([Mailbox, Type.Array(Mailbox, { minItems: 1, maxItems: 50 })]);
const Body = Type.Object({
  from: Mailbox,
  to: Mailboxes,
  cc: Type.Optional(Mailboxes),
  subject: Type.String({ minLength: 1, maxLength: 998 }),
  text: Type.Optional(Type.String({ maxLength: 1_000_000 })),
  html: Type.Optional(Type.String({ maxLength: 1_000_000 })),
  tags: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z0-9_-]{1,128}$' }), Type.String({ maxLength: 256 }))),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
}, { additionalProperties: false });

interface FloorBody { from: string; to: string | string[]; cc?: string | string[]; subject: string; text?: string; html?: string; tags?: Record<string, string>; metadata?: Record<string, unknown> }

const list = (value: string | string[] | undefined) => (value === undefined ? [] : Array.isArray(value) ? value : [value]);
const addressOf = (mailbox: string) => (/<([^>]+)>\s*$/.exec(mailbox)?.[1] ?? mailbox).trim().toLowerCase();

export async function serveFloor(dataDir: string): Promise<{ url: string; keys: string[]; domains: string[] }> {
  const file = join(dataDir, 'floor.db');
  const db = new DatabaseSync(file);
  db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
    CREATE TABLE events (position INTEGER PRIMARY KEY, stream TEXT NOT NULL, revision INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (stream, revision));
    CREATE TABLE content_keys (id TEXT PRIMARY KEY, key TEXT NOT NULL, expires_at TEXT NOT NULL);
    CREATE TABLE charges (email_id TEXT PRIMARY KEY, workspace TEXT NOT NULL, month TEXT NOT NULL, recipients INTEGER NOT NULL);
    CREATE TABLE rate_slots (id TEXT PRIMARY KEY, workspace TEXT NOT NULL, expires_at INTEGER NOT NULL);
    CREATE TABLE suppressions (id TEXT PRIMARY KEY, reason TEXT NOT NULL);
    CREATE TABLE domains (workspace TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, PRIMARY KEY (workspace, name));
    CREATE TABLE api_keys (hash TEXT PRIMARY KEY, workspace TEXT NOT NULL);`);
  const keys: string[] = [];
  const domains: string[] = [];
  for (let w = 0; w < FLOOR_WORKSPACES; w++) {
    keys.push(floorKey(w));
    domains.push(floorDomain(w));
    db.prepare('INSERT INTO domains VALUES (?, ?, ?)').run(`ws${w}`, floorDomain(w), 'verified');
    db.prepare('INSERT INTO api_keys VALUES (?, ?)').run(createHash('sha256').update(floorKey(w)).digest('base64'), `ws${w}`);
  }
  const keyOf = db.prepare('SELECT workspace FROM api_keys WHERE hash = ?');
  const domainOf = db.prepare('SELECT status FROM domains WHERE workspace = ? AND name = ?');
  const suppressionsOf = db.prepare('SELECT id, reason FROM suppressions WHERE id IN (SELECT value FROM json_each(?))');
  const insertSlot = db.prepare('INSERT INTO rate_slots VALUES (?, ?, ?)');
  const insertKey = db.prepare('INSERT INTO content_keys VALUES (?, ?, ?)');
  const insertCharge = db.prepare('INSERT INTO charges VALUES (?, ?, ?, ?)');
  const insertEvent = db.prepare('INSERT INTO events (stream, revision, type, data) VALUES (?, 0, ?, ?)');
  const macKey = createSecretKey(randomBytes(32));

  // One transaction per event-loop turn, answered once the WAL is synced.
  let batch: Array<{ resolve: () => void; reject: (error: unknown) => void }> | null = null;
  let walFd: number | null = null;
  const durably = (write: () => void): Promise<void> => {
    if (!batch) {
      db.exec('BEGIN IMMEDIATE');
      batch = [];
      setImmediate(() => {
        const done = batch!;
        batch = null;
        db.exec('COMMIT');
        walFd ??= openSync(`${file}-wal`, 'r');
        fdatasync(walFd, (error) => done.forEach((w) => (error ? w.reject(error) : w.resolve())));
      });
    }
    db.exec('SAVEPOINT w');
    try {
      write();
      db.exec('RELEASE w');
    } catch (error) {
      db.exec('ROLLBACK TO w');
      db.exec('RELEASE w');
      return Promise.reject(error);
    }
    return new Promise((resolve, reject) => batch!.push({ resolve, reject }));
  };

  const app = Fastify({ logger: false, bodyLimit: 10 * 1024 * 1024 });
  app.post('/v1/emails', { schema: { body: Body } }, async (request, reply) => {
    const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1] ?? '';
    const key = keyOf.get(createHash('sha256').update(bearer).digest('base64')) as { workspace: string } | undefined;
    if (!key) return reply.status(401).send({ error: { code: 'unauthorized', message: 'invalid key' } });
    const { workspace } = key;
    const body = request.body as FloorBody;
    const from = addressOf(body.from);
    if ((domainOf.get(workspace, from.slice(from.lastIndexOf('@') + 1)) as { status: string } | undefined)?.status !== 'verified') {
      return reply.status(422).send({ error: { code: 'domain_not_verified', message: 'domain not verified' } });
    }
    const recipients = [...list(body.to), ...list(body.cc)].map(addressOf);
    const suppressed = suppressionsOf.all(JSON.stringify(recipients.map((a) => `${workspace}:${a}`)));
    const fingerprint = createHmac('sha256', macKey).update(JSON.stringify(body)).digest('hex');
    const emailId = `em_${Date.now().toString(36)}${randomBytes(10).toString('base64url')}`;
    const contentKey = randomBytes(32);
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', createSecretKey(contentKey), iv);
    cipher.setAAD(Buffer.from(emailId));
    const sealed = Buffer.concat([cipher.update(JSON.stringify({ html: body.html, text: body.text }), 'utf8'), cipher.final()]);
    const now = new Date();
    const event = JSON.stringify({
      emailId, workspace, fingerprint, from: body.from, to: list(body.to), cc: list(body.cc), subject: body.subject, tags: body.tags ?? {}, metadata: body.metadata ?? {},
      suppressed: suppressed.length, content: { iv: iv.toString('base64'), data: sealed.toString('base64'), tag: cipher.getAuthTag().toString('base64') }, occurredAt: now.toISOString(),
    });
    await durably(() => {
      insertSlot.run(`${emailId}:rate`, workspace, now.getTime() + 1000);
      insertKey.run(emailId, contentKey.toString('base64'), new Date(now.getTime() + 7 * 86_400_000).toISOString());
      insertCharge.run(emailId, workspace, now.toISOString().slice(0, 7), recipients.length);
      insertEvent.run(emailId, suppressed.length > 0 ? 'EmailSuppressed' : 'EmailAccepted', event);
    });
    return reply.status(202).send({ id: emailId, status: 'queued', test_mode: false });
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { url, keys, domains };
}
