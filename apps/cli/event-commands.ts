// `relay events`, `relay events export`, `relay events schema`: the event store for analysts.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EMAIL_STREAM_PREFIX, emailStreamId } from '../../domain/email/events.ts';
import { USAGE_STREAM_PREFIX } from '../../domain/usage/quota.ts';
import { loadConfig, type RelayConfig } from '../../infra/config.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { asyncApiDocument, eventCatalog } from '../services/event-catalog.ts';
import { KEY_FILE_NAME, parseKey, SecretBox } from '../../infra/secrets/secret-box.ts';
import { CSV_COLUMNS, TIME_FORMS, addressTokens, csvRow, parseBound, readGlobalOrder, redactEvent, upcastStored, type AddressToken, type Bound } from '../services/event-reading.ts';
import { asksForHelp, countProblem, EXIT_USAGE, parseOrExplain } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { isOutputClosed, lineWriter } from './output.ts';
import { printable, printableJson } from './printable.ts';

const POSITION_FORMAT = [
  'Positions are the event store\'s place of an event in the global order, opaque: pass back what was printed.',
  'Embedded store: a decimal integer ("1", "2", …, with gaps); EventStoreDB: "<commit>/<prepare>".',
  'Times are ISO 8601, UTC unless an offset is given: 2026-11-01 (midnight), 2026-11-01T10:00:00 (or a space for the T),',
  '2026-11-01T12:00:00+02:00; a date or time of day that does not exist is refused. They compare with recordedAt, when the',
  'store recorded the event.',
];

const EVENTS_USAGE = [
  'usage: relay events [--after POSITION] [--since TIME] [--until TIME] [--prefix STREAM_PREFIX]... [--type EVENT_TYPE]...',
  '                    [--limit N] [--upcast] [--redact] [--follow]',
  '       relay events --stream STREAM_ID|EMAIL_ID [--from REVISION] [--limit N] [--upcast] [--redact]',
  '       relay events export [--from TIME|POSITION] [--to TIME|POSITION] [--project PROJECT_ID] [--format jsonl|csv] [--redact] > FILE',
  '       relay events schema     the event catalog (AsyncAPI 3, as GET /v1/asyncapi.json serves it)',
  'Prints one JSON object per line: {id, streamId, revision, position, type, data, metadata, recordedAt}.',
  '  --type: the exact event type (relay events schema lists them); --upcast: the data as today\'s projections read it',
  '  (older versions converted); --redact: no sealed content (bodies, BCC), every address a token keyed by Relay\'s secret',
  '  key (RELAY_SECRET_KEY, else the data directory\'s secret.key; refused without one) with its domain.',
  '  export: always upcast; --from is exclusive for a position, --to inclusive (and not before --from); progress on stderr.',
  '  --project: the events within the bounds of that project\'s emails, also of emails accepted before --from.',
  ...POSITION_FORMAT,
].join('\n');

const refuse = (problem: string): number => {
  console.error(`relay: ${problem}\n\n${EVENTS_USAGE}`);
  return EXIT_USAGE;
};

/**
 * What --redact puts in place of an address: a token keyed by the installation's current secret
 * key (addressTokens), so it is the same in every export and testable by no one without the
 * key. The key is RELAY_SECRET_KEY, else the data directory's key file; a command that only
 * reads never makes one (a new key would give tokens that join with nothing), so without either
 * (a backup made --without-secret-key, say) it says why on stderr and gives null (exit 1).
 */
async function redactionToken(config: RelayConfig): Promise<AddressToken | null> {
  const refuseRedaction = (why: string) => {
    console.error(`relay: --redact replaces every address by a token keyed by Relay's secret key, and ${why}: set RELAY_SECRET_KEY to this installation's key `
      + '(the content of the secret.key file of its data directory), or leave out --redact (the export then holds the addresses in clear)');
    return null;
  };
  try {
    if (config.secretKey !== null) return addressTokens(new SecretBox({ current: parseKey(config.secretKey), previous: [] }));
    const file = join(config.dataDir, KEY_FILE_NAME);
    if (!existsSync(file)) return refuseRedaction(`RELAY_SECRET_KEY is not set and ${file} does not exist`);
    return addressTokens(new SecretBox({ current: parseKey(await readFile(file, 'utf8'), `The key file ${file}`), previous: [] }));
  } catch (error) {
    // parseKey's message names the variable or the file, never the value.
    return refuseRedaction(`the key cannot be read (${(error as Error).message})`);
  }
}

/** Why `--stream GIVEN` found nothing, and which stream (or prefix) to ask for instead. */
function noStreamHint(given: string, stream: string): string {
  const kinds = `streams are ${EMAIL_STREAM_PREFIX}<emailId> (or just the email id), ${USAGE_STREAM_PREFIX}<workspaceId>-<YYYY-MM> and suppressions-<workspaceId>`;
  if (stream !== given) return `no email ${given} here: its stream ${stream} has no events`;
  if (/^ws_[A-Za-z0-9_-]+$/.test(given)) {
    return `a workspace's streams are ${USAGE_STREAM_PREFIX}${given}-<YYYY-MM> (usage) and suppressions-${given}: relay events --prefix ${USAGE_STREAM_PREFIX}${given}-`;
  }
  if (/^(prj|dom|key|usr|whe)_[A-Za-z0-9_-]+$/.test(given)) return `${given} is not a stream: only emails and workspaces have streams (${kinds})`;
  return `stream ${JSON.stringify(given)} has no events; ${kinds}; relay events --prefix PREFIX lists streams by prefix`;
}

function boundOf(text: string | undefined, name: string): Bound | null | 'bad' {
  if (text === undefined) return null;
  const bound = parseBound(text);
  if ('problem' in bound) {
    console.error(`relay: ${name}: ${bound.problem}\n\n${EVENTS_USAGE}`);
    return 'bad';
  }
  return bound;
}

export async function events(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(EVENTS_USAGE);
    return 0;
  }
  if (args[0] === 'schema') {
    if (args.length > 1) return refuse('events schema takes no arguments');
    // The event catalog needs no store: it is generated from the event schemas.
    console.log(printableJson(asyncApiDocument(), 2));
    return 0;
  }
  if (args[0] === 'export') return exportEvents(args.slice(1));
  const parsed = parseOrExplain(args, {
    stream: { type: 'string' },
    after: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    from: { type: 'string' },
    prefix: { type: 'string', multiple: true },
    type: { type: 'string', multiple: true },
    limit: { type: 'string' },
    follow: { type: 'boolean' },
    upcast: { type: 'boolean' },
    redact: { type: 'boolean' },
  }, EVENTS_USAGE);
  if (!parsed) return EXIT_USAGE;
  const { values, positionals } = parsed;
  if (positionals.length) return refuse(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const limitProblem = values.limit === undefined ? null : countProblem('--limit', values.limit);
  if (limitProblem !== null) return refuse(limitProblem);
  if (values.from !== undefined && !/^\d{1,16}$/.test(values.from)) return refuse(`--from must be a stream revision (0, 1, 2, …), got ${JSON.stringify(values.from)}`);
  if (values.stream !== undefined && values.stream === '') return refuse('--stream needs a stream id');
  if (values.stream && (values.follow || values.after || values.prefix || values.type || values.since || values.until)) return refuse('--stream reads one stream: it takes only --from, --limit, --upcast and --redact');
  if (!values.stream && values.from !== undefined) return refuse('--from goes with --stream; use --after or --since for the global order');
  const since = values.since === undefined ? null : parseBound(values.since);
  const until = values.until === undefined ? null : parseBound(values.until);
  if (since && 'problem' in since) return refuse(`--since: ${since.problem}`);
  if (until && 'problem' in until) return refuse(`--until: ${until.problem}`);
  if (since && !('time' in since)) return refuse(`--since must be a time, got ${JSON.stringify(values.since)}; write ${TIME_FORMS}`);
  if (until && !('time' in until)) return refuse(`--until must be a time, got ${JSON.stringify(values.until)}; write ${TIME_FORMS}`);
  if (since && values.after) return refuse('--after and --since both say where to start: give one');
  if (until && values.follow) return refuse('--until ends the output; --follow never does: give one');
  const known = new Set(eventCatalog().map((e) => e.type));
  for (const type of values.type ?? []) {
    if (!known.has(type)) console.error(`relay: warning: ${type} is no event type of this version (relay events schema lists them); matching it exactly anyway`);
  }
  const limit = values.limit === undefined ? Infinity : Number(values.limit);
  const config = loadConfig();
  const stores = await openExistingStores(config, ['events']);
  if (!stores) return 1;
  const write = lineWriter(process.stdout);
  try {
    const token = values.redact ? await redactionToken(config) : null;
    if (values.redact && token === null) return 1;
    const shape = (e: StoredEvent) => {
      const read = values.upcast ? upcastStored(e) : e;
      return printableJson(token ? redactEvent(read, token) : read);
    };
    let printed = 0;
    if (values.stream) {
      // An email id names its stream: `relay events --stream em_…` reads `email-em_…`.
      const stream = /^em_[A-Za-z0-9_-]+$/.test(values.stream) ? emailStreamId(values.stream) : values.stream;
      const fromRevision = Number(values.from ?? 0);
      const found = await stores.events.readStream(stream, { fromRevision, maxCount: Number.isFinite(limit) ? limit : undefined });
      for (const e of found) await write(shape(e));
      if (found.length > 0) return 0;
      // Nothing to print: say why, on stderr, rather than leave the operator with silence.
      if (fromRevision > 0 && (await stores.events.readStream(stream, { maxCount: 1 })).length > 0) {
        console.error(`(stream ${stream} has no events from revision ${fromRevision})`);
        return 0;
      }
      console.error(`relay: ${noStreamHint(values.stream, stream)}`);
      return 1;
    }
    // Exact types: the store filters by prefix, the exact match is made here.
    const types = values.type ? new Set(values.type) : undefined;
    const filter = { streamPrefixes: values.prefix, eventTypePrefixes: values.type };
    // Positions are the store's own format: it tells whether --after is one of them
    // (adapters refuse arguments they did not hand out with a TypeError).
    try {
      await stores.events.readAll({ after: values.after ?? null, maxCount: 0, filter });
    } catch (error) {
      if (error instanceof TypeError) return refuse(`--after/--prefix/--type: ${error.message}`);
      throw error;
    }
    // Where the live part starts: after the last event the catch-up read went past, printed or
    // not (with --since and nothing recorded since, the last one before it), never the start.
    let after: string | null = values.after ?? null;
    const from: Bound | null = since ?? (after ? { position: after } : null);
    const read = { from, to: until, filter, types, limit: Number.isFinite(limit) ? limit : undefined, batchSize: 500, onRead: (position: string) => (after = position) };
    for await (const batch of readGlobalOrder(stores.events, read)) {
      for (const e of batch) await write(shape(e));
      printed += batch.length;
    }
    if (!values.follow || printed >= limit) return 0;
    const sinceMs = since && 'time' in since ? since.time.getTime() : null;
    await new Promise<void>((resolve) => {
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        process.stdout.off('close', stop);
        void subscription.stop().then(resolve);
      };
      const subscription = stores.events.subscribeAll({ after, filter }, async (e) => {
        if (stopping || (types && !types.has(e.type))) return;
        // Also by time, as the catch-up: nothing recorded before --since, wherever the live part starts.
        if (sinceMs !== null && Date.parse(e.recordedAt) < sinceMs) return;
        try {
          await write(shape(e));
        } catch (error) {
          // The reader went away (`| head -1`): stop, as the catch-up does. Rethrown, the store
          // would retry the write to a dead pipe for ever.
          if (!isOutputClosed(error)) throw error;
          stop();
          return;
        }
        if (++printed >= limit) stop();
      });
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      // A reader that leaves while nothing new is recorded ends the follow too.
      process.stdout.once('close', stop);
    });
    return 0;
  } finally {
    await stores.close();
  }
}

/**
 * Why the store refuses these bounds, or null: a position it did not hand out, or an end before
 * the start (adapters refuse both with a TypeError, as they do for `relay events --after`).
 */
async function refusedBounds(events: EventStore, bounds: { after?: string; upTo?: string }): Promise<string | null> {
  try {
    await events.readAll({ ...bounds, maxCount: 0 });
    return null;
  } catch (error) {
    if (error instanceof TypeError) return error.message;
    throw error;
  }
}

async function exportEvents(args: string[]): Promise<number> {
  const parsed = parseOrExplain(args, {
    from: { type: 'string' },
    to: { type: 'string' },
    project: { type: 'string' },
    format: { type: 'string' },
    redact: { type: 'boolean' },
  }, EVENTS_USAGE);
  if (!parsed) return EXIT_USAGE;
  const { values, positionals } = parsed;
  if (positionals.length) return refuse(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const format = values.format ?? 'jsonl';
  if (format !== 'jsonl' && format !== 'csv') return refuse(`--format must be jsonl or csv, got ${JSON.stringify(format)}`);
  if (values.project !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(values.project)) return refuse(`--project must be a project id, got ${JSON.stringify(values.project)}`);
  const from = boundOf(values.from, '--from');
  const to = boundOf(values.to, '--to');
  if (from === 'bad' || to === 'bad') return EXIT_USAGE;
  if (from && to && 'time' in from && 'time' in to && to.time < from.time) {
    return refuse(`--to ${to.time.toISOString()} comes before --from ${from.time.toISOString()}`);
  }
  const config = loadConfig();
  const stores = await openExistingStores(config, ['events']);
  if (!stores) return 1;
  try {
    const token = values.redact ? await redactionToken(config) : null;
    if (values.redact && token === null) return 1;
    const fromPosition = from && 'position' in from ? from.position : undefined;
    const toPosition = to && 'position' in to ? to.position : undefined;
    const fromProblem = fromPosition === undefined ? null : await refusedBounds(stores.events, { after: fromPosition });
    if (fromProblem) return refuse(`--from: ${fromProblem}`);
    const toProblem = toPosition === undefined ? null : await refusedBounds(stores.events, { upTo: toPosition });
    if (toProblem) return refuse(`--to: ${toProblem}`);
    // Only the store orders its positions (EventStoreDB's are commit/prepare pairs).
    if (fromPosition !== undefined && toPosition !== undefined && (await refusedBounds(stores.events, { after: fromPosition, upTo: toPosition }))) {
      return refuse(`--to ${toPosition} comes before --from ${fromPosition}`);
    }
    const write = lineWriter(process.stdout);
    if (format === 'csv') await write(CSV_COLUMNS.join(','));
    let count = 0;
    let last: StoredEvent | null = null;
    let shown = 0;
    const progress = (done: boolean) => {
      const now = Date.now();
      if (!done && now - shown < 1000) return;
      shown = now;
      const where = last ? ` (position ${last.position}, recorded ${last.recordedAt})` : '';
      process.stderr.write(`${done ? 'exported' : 'exporting'} ${count} events${where}${process.stderr.isTTY && !done ? '\r' : '\n'}`);
    };
    for await (const batch of readGlobalOrder(stores.events, { from, to, projectId: values.project })) {
      for (const stored of batch) {
        const event = upcastStored(stored);
        const shaped = token ? redactEvent(event, token) : event;
        await write(format === 'csv' ? printable(csvRow(shaped, printableJson)) : printableJson(shaped));
      }
      count += batch.length;
      last = batch[batch.length - 1];
      progress(false);
    }
    progress(true);
    return 0;
  } finally {
    await stores.close();
  }
}
