// What one email's delivery costs in reads of the sender's schedule must not grow with the
// workspaces whose mail is all due later (a retry after a deferral, a greylisted burst). The
// sender gives workspaces turns (apps/processors/sender.ts dueBySite); a first version found the
// workspaces with due mail by walking every workspace's first item, one read each and no bound
// per look: with 1,000 such workspaces one email cost about 16,000 reads on the embedded store
// (with 10,000, each look held the event loop about 130 ms, the API's too in the default single
// process), and on FerretDB, where every read scans the schedule, 300 of them delayed a sign-in
// code by seconds. Now a look reads the earliest page of the schedule (the dueAt index: what is
// due now, whoever's it is) and scans a few workspaces only behind a backlog longer than that page.
//
// Shown through the real sender and a real SMTP smarthost, in both modes: W workspaces hold one
// retry each, due in an hour; one email is sent; the schedule reads the sender makes until the
// smarthost has that email are counted (a wrapper around the store's `deliveries` collection).
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { workItems, type WorkItem } from '../apps/services/delivery/work-items.ts';
import { originOfRequest } from '../domain/events/metadata.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { distributedSkipReason, type Mode } from './support/list-modes.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

/**
 * Workspaces that only have mail due later, per mode (fewer on the distributed store, where each
 * read is a round trip: 300 already delay the email by seconds there).
 */
const IDLE_WORKSPACES: Record<Mode, number> = { embedded: 1_000, distributed: 300 };
/**
 * Schedule reads one email's delivery may take, whatever the number of idle workspaces: a
 * third of them here. Without any, it took about 50 (embedded: a few reads per look, a dozen
 * looks) and 5 (distributed).
 */
const READS_BOUND: Record<Mode, number> = { embedded: 333, distributed: 100 };

function withDatabase(url: string, database: string): string {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?#]*)(?:\/[^?#]*)?(.*)$/i.exec(url);
  if (!match) throw new Error(`RELAY_MONGODB_URL is not a mongodb URL: ${url}`);
  return `${match[1]}/${database}${match[2]}`;
}

/** Counts the finds on the schedule (the `deliveries` collection) made through `documents` from now on. */
function countScheduleReads(documents: DocumentStore): { reads: number } {
  const counter = { reads: 0 };
  const collection = documents.collection.bind(documents);
  documents.collection = ((name: string) => {
    const opened = collection(name as never);
    if (name !== COLLECTIONS.deliveries) return opened;
    const find = opened.find.bind(opened);
    opened.find = ((options: never) => {
      counter.reads++;
      return find(options);
    }) as never;
    return opened;
  }) as DocumentStore['collection'];
  return counter;
}

for (const mode of ['embedded', 'distributed'] as Mode[]) {
  interface Ctx { t: TestApp; sink: SmtpSink; database: string | null }
  const test = skippableSuite<Ctx>(`sender (${mode}): the cost of a look and workspaces with mail due later`, mode === 'distributed' ? distributedSkipReason() : undefined);

  test.before(async (ctx) => {
    ctx.sink = await startSmtpSink();
    const env: Record<string, string> = { RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none` };
    ctx.database = null;
    if (mode === 'distributed') {
      ctx.database = `relay_lookcost_${randomBytes(6).toString('hex')}`;
      env.RELAY_MONGODB_URL = withDatabase(process.env.RELAY_MONGODB_URL!.trim(), ctx.database);
    }
    ctx.t = await startTestApp(env, { processors: ['sender'] });
  });

  test.after(async (ctx) => {
    await ctx.t?.close();
    await ctx.sink?.close();
    if (ctx.database) {
      const admin = await MongoClient.connect(process.env.RELAY_MONGODB_URL!.trim());
      try {
        await admin.db(ctx.database).dropDatabase();
      } finally {
        await admin.close();
      }
    }
  });

  const idle = IDLE_WORKSPACES[mode];
  const bound = READS_BOUND[mode];
  test(`one email's delivery reads the schedule a bounded number of times while ${idle} workspaces have only retries due in an hour`, async ({ t, sink }) => {
    const tenant = await deliveryTenant(t);
    // Each workspace's retry, as the sender writes it after a deferral (its email's stream is not needed: it is never due here).
    const later = new Date(t.ctx.now().getTime() + 3_600_000).toISOString();
    const retries = Array.from({ length: idle }, (_, i): WorkItem => ({
      _id: `em_deferred_${String(i).padStart(5, '0')}`, step: 'attempt', attempt: 2, dueAt: later, streamRevision: 3,
      origin: originOfRequest(`deferred-${i}`), domain: 'greylisting.example', workspaceId: `ws_deferred_${String(i).padStart(5, '0')}`,
    }));
    for (let i = 0; i < retries.length; i += 100) await workItems(t.stores.documents).insertMany!(retries.slice(i, i + 100));

    const counter = countScheduleReads(t.stores.documents);
    const id = await send(t, tenant.key, { from: `security@${tenant.domain}`, to: 'someone@example.net', subject: 'Your sign-in code', text: '123456' });
    await waitUntil(() => sink.messages.some((m) => m.rcptTo.some((r) => r.address === 'someone@example.net')), `${id} reaches the smarthost`, 120_000);
    const reads = counter.reads;
    assert.ok(reads <= bound,
      `delivering one email took ${reads} reads of the schedule (bound ${bound}): about ${idle} per look, one per workspace whose mail is only due later`);
  });

  test.run();
}
