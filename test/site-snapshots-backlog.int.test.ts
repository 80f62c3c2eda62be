// The sender writes a snapshot of every site it knows (up to 10,000) every 5 s (publishSites,
// apps/services/delivery/sites.ts), one read and one write per site, for `relay sites` and
// /metrics. A round can take longer than the interval (many sites, a networked store's round
// trips): the ticks that come meanwhile start no rounds of their own, so rounds never queue up
// behind a slow one, and a stop waits for the round under way and writes one last round with the
// states of then. Shown on a real sqlite store with one round held at its first write (as a slow
// store would hold it) while many intervals pass.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SiteRegistry, publishSites, siteSnapshots } from '../apps/services/delivery/sites.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';

const SITES = 50;
const EVERY_MS = 20;
const HELD_MS = 20 * EVERY_MS;

const test = suite('site snapshot rounds that take longer than their interval');

/** The store, with the snapshot writes (insert or replace) counted and the first one held until released. */
function heldAtFirstWrite(documents: DocumentStore) {
  let writes = 0;
  let reached!: () => void;
  const held = new Promise<void>((resolve) => { reached = resolve; });
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  const wrapped = new Proxy(documents, {
    get(target, prop, receiver) {
      if (prop !== 'collection') return Reflect.get(target, prop, receiver);
      return (name: string) => {
        const collection = target.collection(name);
        return new Proxy(collection, {
          get(c, p, r) {
            const value = Reflect.get(c, p, r);
            if ((p === 'insert' || p === 'replace') && typeof value === 'function') {
              return async (...args: unknown[]) => {
                if (++writes === 1) {
                  reached();
                  await released;
                }
                return (value as (...a: unknown[]) => unknown).apply(c, args);
              };
            }
            return typeof value === 'function' ? value.bind(c) : value;
          },
        });
      };
    },
  }) as DocumentStore;
  return { documents: wrapped, writes: () => writes, held, release };
}

test('ticks during a round still being written queue no rounds: stop() ends the round under way and writes one last round', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-sites-'));
  const store = new SqliteDocumentStore(join(dir, 'relay.db'));
  try {
    const sites = new SiteRegistry({ dns: null, rules: [] });
    for (let i = 0; i < SITES; i++) await sites.resolve(`d${i}.example.test`);
    const { documents, writes, held, release } = heldAtFirstWrite(store);
    const errors: Error[] = [];
    const publishing = publishSites(documents, sites, (error) => errors.push(error), EVERY_MS);
    // publishSites' timer does not keep the process alive: this does until the first tick.
    const alive = setTimeout(() => {}, 60_000);
    await held;
    clearTimeout(alive);
    // A round is under way; many ticks come while it is held.
    await new Promise((resolve) => setTimeout(resolve, HELD_MS));
    sites.record('d0.example.test', { result: 'delivered', smtpCode: 250, enhancedCode: '2.0.0', response: '250 2.0.0 ok' });
    release();
    await publishing.stop();
    assert.equal(errors, []);
    assert.is(writes() / SITES, 2,
      `${writes() / SITES} rounds of ${SITES} snapshots were written: the held round and the last one only, not one per tick of the ${HELD_MS / EVERY_MS} intervals it was held`);
    const d0 = (await siteSnapshots(store).find({})).find((s) => s.site === 'd0.example.test');
    assert.is(d0?.delivered, 1, 'the last round wrote the state of the stop');
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
