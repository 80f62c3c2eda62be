// The webhook schedule's read while an endpoint is at its bound of requests in flight (an
// ordinary bulk send puts it there): what one look at the due deliveries costs with and without
// a large backlog that is due later (a down endpoint's retries), on the embedded store, where the
// read runs on the pipeline thread that the sender and every processor share. The look should
// cost what is due, not the backlog behind it (apps/services/webhooks/deliveries.ts).
//
//   node test/bench/webhook-due.bench.ts        (or: npm run bench -- webhook-due)
//   BENCH_BACKLOG=100000   deliveries due an hour from now and later
//
// 200 deliveries due now to one endpoint answered after 5 ms each (so it sits at its bound), run
// by the webhooks processor's real dispatcher; each read of due deliveries is timed.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deliveriesOf, ensureDeliveryIndexes, type WebhookDelivery } from '../../apps/services/webhooks/deliveries.ts';
import type { Collection, DocumentStore, FindOptions } from '../../infra/ports/document-store.ts';
import { SecretBox } from '../../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../../infra/sqlite/document-store.ts';
import { waitUntil } from '../support/eventually.ts';
import { addEndpoint, dueAt, OK, startWebhookDispatcher } from '../support/webhook-dispatch.ts';

/** The store, timing each read of due deliveries. */
function timing(documents: DocumentStore, reads: number[]): DocumentStore {
  return new Proxy(documents, {
    get(target, name) {
      if (name !== 'collection') return Reflect.get(target, name, target);
      return (collectionName: string) => {
        const collection = target.collection(collectionName) as Collection<{ _id: string }>;
        return new Proxy(collection, {
          get(inner, method) {
            const value = Reflect.get(inner, method, inner);
            if (method !== 'find') return typeof value === 'function' ? value.bind(inner) : value;
            return async (options?: FindOptions) => {
              const due = options?.where?.nextAttemptAt;
              if (!(due && typeof due === 'object' && 'lte' in due)) return inner.find(options);
              const started = performance.now();
              try {
                return await inner.find(options);
              } finally {
                reads.push(performance.now() - started);
              }
            };
          },
        });
      };
    },
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * 200 deliveries due now to `busy` (so it sits at its bound of 4), answered after 5 ms, and
 * `backlog` pending deliveries of a down endpoint, due an hour from now and later. Returns the
 * median time of a read of due deliveries while `busy` is worked off.
 */
async function run(backlog: number): Promise<{ median: number; reads: number; tookMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-bench-due-read-'));
  const documents = new SqliteDocumentStore(join(dir, 'relay.db'));
  try {
    const secrets = new SecretBox({ current: randomBytes(32), previous: [] });
    await ensureDeliveryIndexes(documents);
    await addEndpoint(documents, secrets, 'down', 'prj_1');
    await addEndpoint(documents, secrets, 'busy', 'prj_2');
    const later = Date.now() + 3_600_000;
    const docs: WebhookDelivery[] = [];
    for (let i = 0; i < backlog; i++) {
      const due = new Date(later + i * 100).toISOString();
      docs.push({ _id: `whd_down_${i}`, emailId: `em_${i}`, projectId: 'prj_1', endpointId: 'down', eventId: `evt_${i}`, type: 'email.sent', body: '{}', status: 'pending', attempts: 1, nextAttemptAt: due, attemptLogs: [], createdAt: due, updatedAt: due });
    }
    const BUSY = 200;
    for (let i = 0; i < BUSY; i++) {
      const due = dueAt(i);
      docs.push({ _id: `whd_busy_${String(i).padStart(4, '0')}`, emailId: `em_b${i}`, projectId: 'prj_2', endpointId: 'busy', eventId: `evt_b${i}`, type: 'email.sent', body: '{}', status: 'pending', attempts: 0, nextAttemptAt: due, attemptLogs: [], createdAt: due, updatedAt: due });
    }
    await deliveriesOf(documents).insertMany!(docs);
    const reads: number[] = [];
    const errors: Error[] = [];
    const started = performance.now();
    const dispatcher = await startWebhookDispatcher({
      documents: timing(documents, reads), secrets, errors, post: () => new Promise((resolve) => setTimeout(() => resolve(OK), 5)),
    });
    try {
      await waitUntil(async () => (await deliveriesOf(documents).count({ endpointId: 'busy', status: 'succeeded' })) === BUSY, 'busy\'s deliveries all succeeded', 30_000);
    } finally {
      await dispatcher.stop();
    }
    if (errors.length > 0) throw errors[0];
    return { median: median(reads), reads: reads.length, tookMs: performance.now() - started };
  } finally {
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 100_000);
const without = await run(0);
const withBacklog = await run(BACKLOG);
console.log(`webhook due reads: node ${process.version}; 200 deliveries due to an endpoint at its bound`);
console.log(`  no backlog:                 median read ${without.median.toFixed(2)} ms, ${without.reads} reads, worked off in ${Math.round(without.tookMs)} ms`);
console.log(`  ${BACKLOG.toLocaleString('en')} due later:`.padEnd(30) + ` median read ${withBacklog.median.toFixed(2)} ms, ${withBacklog.reads} reads, worked off in ${Math.round(withBacklog.tookMs)} ms (${(withBacklog.median / without.median).toFixed(1)}× the read without)`);
