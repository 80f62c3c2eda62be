// `relay parked list|retry|dismiss`: the events a processor (or a rebuild) could not apply and
// went past (apps/services/parked-events.ts), for operators.
import { parseArgs } from 'node:util';
import { loadConfig } from '../../infra/config.ts';
import type { StoredEvent } from '../../infra/ports/event-store.ts';
import { RETRY_GROUP_HEADER } from '../processors/processor.ts';
import { processorNamed } from '../processors/registry.ts';
import { EVENTS_TOPIC_PARTITIONS } from '../pipeline/topics.ts';
import { eventRecord } from '../../infra/events-topic.ts';
import type { Stores, StoresWithoutLog } from '../runtime.ts';
import {
  ensureParkedIndexes, listParked, markRetryRequested, parkEvent, parkedEventsOf, resolveParked, type ParkedEvent,
} from '../services/parked-events.ts';
import { PROJECTIONS } from '../services/projection-registry.ts';
import { asksForHelp, countProblem } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printable, printableJson } from './printable.ts';

const USAGE = [
  'usage: relay parked list [--processor NAME] [--limit N] [--json]',
  '       relay parked retry <id> [--wait SECONDS] [--json]',
  '       relay parked dismiss <id>',
  'Parked events are events a processor (or `relay projections rebuild`, as rebuild:<name>) could not',
  'apply after its retries and went past. retry hands one to its processor again (a rebuild\'s is',
  'applied to the live read model here) and waits for the outcome: exit 0 applied, 1 failed again,',
  '75 not handled within --wait (default 30; 0 does not wait). dismiss forgets one.',
].join('\n');

const EXIT_USAGE = 2;
const EXIT_PENDING = 75; // sysexits EX_TEMPFAIL

// The error is a processor's message, often quoting what a customer sent.
const line = (p: ParkedEvent) => printable(
  `${p._id}  ${p.processor}  ${p.type ?? '?'} ${p.streamId}${p.revision === null ? '' : `@${p.revision}`}  attempts ${p.attempts}  last ${p.lastFailedAt}  ${p.error.replace(/\s+/g, ' ')}`,
);

const view = ({ _v, ...p }: ParkedEvent & { _v?: number }) => {
  void _v;
  return p;
};

export async function parked(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: { processor: { type: 'string' }, limit: { type: 'string' }, wait: { type: 'string' }, json: { type: 'boolean' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    console.error(`relay: ${(error as Error).message}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const { values, positionals } = parsed;
  const refuse = (problem: string) => {
    console.error(`relay: ${problem}\n\n${USAGE}`);
    return EXIT_USAGE;
  };
  const [verb, id, ...extra] = positionals;
  if (extra.length > 0) return refuse(`unexpected argument ${JSON.stringify(extra[0])}`);
  if (verb === 'list') {
    if (id !== undefined) return refuse(`unexpected argument ${JSON.stringify(id)}`);
    if (values.wait !== undefined) return refuse('--wait goes with retry');
    const limitProblem = values.limit === undefined ? null : countProblem('--limit', values.limit, 9999);
    if (limitProblem !== null) return refuse(limitProblem);
    return withStores(await openExistingStores(loadConfig()), async (stores) => {
      const found = await listParked(stores.documents, { processor: values.processor, limit: Number(values.limit ?? 100) });
      if (values.json) console.log(printableJson({ parked: found.map(view) }));
      else if (found.length === 0) console.error(values.processor ? `(no parked events of ${values.processor})` : '(no parked events)');
      else for (const p of found) console.log(line(p));
      return 0;
    });
  }
  if (verb === 'retry' || verb === 'dismiss') {
    if (!id) return refuse(`${verb} needs the id of a parked event (relay parked list)`);
    if (values.processor !== undefined || values.limit !== undefined) return refuse('--processor and --limit go with list');
    if (verb === 'dismiss' && (values.wait !== undefined || values.json)) return refuse('dismiss takes no options');
    if (values.wait !== undefined && !/^\d{1,4}$/.test(values.wait)) return refuse(`--wait must be a number of seconds, got ${JSON.stringify(values.wait)}`);
    if (verb === 'dismiss') {
      return withStores(await openExistingStores(loadConfig()), async (stores) => {
        if (!(await parkedEventsOf(stores.documents).get(id))) return noParked(id);
        await resolveParked(stores.documents, id);
        console.log(`dismissed ${id}`);
        return 0;
      });
    }
    // A retry publishes the event to its processor's topic again: the one use of the log.
    return withStores(await openExistingStores(loadConfig(), ['events', 'documents'], { log: true }), async (stores) => {
      const found = await parkedEventsOf(stores.documents).get(id);
      if (!found) return noParked(id);
      return retry(stores, found, Number(values.wait ?? 30), values.json === true);
    });
  }
  return refuse(verb === undefined ? 'which one: list, retry or dismiss?' : `unknown subcommand ${JSON.stringify(verb)}`);
}

function noParked(id: string): number {
  console.error(`relay: no parked event ${id} (relay parked list)`);
  return 1;
}

/** Parked events are read from the document store and retried from the event store. */
async function withStores<S extends StoresWithoutLog>(stores: S | null, work: (stores: S) => Promise<number>): Promise<number> {
  if (!stores) return 1;
  try {
    await ensureParkedIndexes(stores.documents);
    return await work(stores);
  } finally {
    await stores.close();
  }
}

/** The event as the event store holds it (the source of truth; the log may have pruned it). */
async function storedEvent(stores: StoresWithoutLog, parked: ParkedEvent): Promise<StoredEvent | null> {
  if (parked.revision === null) return null;
  const [event] = await stores.events.readStream(parked.streamId, { fromRevision: parked.revision, maxCount: 1 });
  return event && event.id === parked.eventId ? event : null;
}

async function retry(stores: Stores, parked: ParkedEvent, waitSeconds: number, json: boolean): Promise<number> {
  const report = (outcome: 'applied' | 'failed' | 'sent' | 'pending', message: string, error?: string) => {
    if (json) console.log(printableJson({ id: parked._id, outcome, ...(error ? { error } : {}) }));
    else (outcome === 'failed' || outcome === 'pending' ? console.error : console.log)(printable(message));
  };
  const event = await storedEvent(stores, parked);
  if (!event) {
    console.error(`relay: ${parked._id} names no event of the event store (${parked.eventId}: an undecodable record?); nothing to retry: relay parked dismiss ${parked._id}`);
    return 1;
  }
  const rebuilt = /^rebuild:(.+)$/.exec(parked.processor)?.[1];
  if (rebuilt !== undefined) {
    // A rebuild's parked event: applied here to the live read model.
    const projection = PROJECTIONS[rebuilt];
    if (!projection) {
      console.error(`relay: ${parked.processor}: no projection ${rebuilt}`);
      return 1;
    }
    try {
      await projection.apply(stores.documents, stores.events, event, projection.collection);
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      const now = new Date();
      await parkEvent(stores.documents, { processor: parked.processor, group: parked.group, event, error: failure, attempts: 1, firstFailedAt: now, lastFailedAt: now });
      report('failed', `${parked._id} failed again: ${failure.message}`, failure.message);
      return 1;
    }
    await resolveParked(stores.documents, parked._id);
    report('applied', `${parked._id} applied to ${projection.collection}; no longer parked`);
    return 0;
  }
  if (!processorNamed(parked.processor) || parked.topic === null) {
    console.error(`relay: ${parked._id}: no processor ${parked.processor} to hand it to`);
    return 1;
  }
  // Published again for its group only (the others skip it); handlers are idempotent, and
  // guarded by stream revisions, so it may come after later events of its stream.
  const requested = await markRetryRequested(stores.documents, parked._id, new Date());
  if (!requested) {
    report('applied', `${parked._id} is no longer parked`);
    return 0;
  }
  await stores.log.ensureTopic(parked.topic, EVENTS_TOPIC_PARTITIONS);
  const record = eventRecord(event);
  await stores.log.publish(parked.topic, [{ ...record, headers: { ...record.headers, [RETRY_GROUP_HEADER]: parked.group } }]);
  if (waitSeconds === 0) {
    report('sent', `${parked._id} sent again to ${parked.group}`);
    return 0;
  }
  const deadline = Date.now() + waitSeconds * 1000;
  while (Date.now() < deadline) {
    const now = await parkedEventsOf(stores.documents).get(parked._id);
    if (!now) {
      report('applied', `${parked._id} applied by ${parked.group}; no longer parked`);
      return 0;
    }
    if (now.attempts > requested.attempts) {
      report('failed', `${parked._id} failed again (${now.attempts} attempts in all): ${now.error}`, now.error);
      return 1;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  report('pending', `${parked._id} sent again to ${parked.group}, not handled within ${waitSeconds} s (is \`relay processor ${parked.processor}\` running?)`);
  return EXIT_PENDING;
}
