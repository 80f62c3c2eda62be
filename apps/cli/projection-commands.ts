// `relay projections rebuild|scratch|drop` and `relay events`: replay and export for analysts and ops.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { EMAIL_STREAM_PREFIX, emailStreamId } from '../../domain/email/events.ts';
import { USAGE_STREAM_PREFIX } from '../../domain/usage/quota.ts';
import { loadConfig } from '../../infra/config.ts';
import { openStores } from '../runtime.ts';
import { asyncApiDocument } from '../services/event-catalog.ts';
import { PROJECTIONS } from '../services/projection-registry.ts';
import { rebuildProjection, scratchCollectionProblem, type RebuildProgress } from '../services/rebuild.ts';
import { collectionNameProblem, dropScratch, listScratch } from '../services/scratch-collections.ts';
import { asksForHelp } from './command.ts';

function progressBar(stream: NodeJS.WriteStream) {
  let last = 0;
  return (p: RebuildProgress) => {
    const now = Date.now();
    if (p.phase === 'rebuilding' && p.done !== p.total && now - last < 100) return;
    last = now;
    const width = 30;
    const ratio = p.total > 0 ? Math.min(1, p.done / p.total) : p.phase === 'swapped' ? 1 : 0;
    const bar = '#'.repeat(Math.round(ratio * width)).padEnd(width, '.');
    const line = `${p.phase.padEnd(11)} [${bar}] ${String(Math.round(ratio * 100)).padStart(3)}% ${p.done}/${p.total} events`;
    if (stream.isTTY) stream.write(`\r${line}${p.phase === 'swapped' ? '\n' : ''}`);
    else if (p.phase !== 'rebuilding' || p.done === p.total || p.done % 1000 === 0) stream.write(`${line}\n`);
  };
}

const EXIT_USAGE = 2;

/** Arguments as parseArgs reads them, or null after printing what is wrong and the usage. */
function parseOrExplain<T extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: T, usage: string) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    console.error(`relay: ${(error as Error).message}\n\n${usage}`);
    return null;
  }
}


const PROJECTIONS_USAGE = [
  `usage: relay projections rebuild <${Object.keys(PROJECTIONS).join('|')}> [--into COLLECTION] [--json]`,
  '       relay projections scratch [--json]',
  '       relay projections drop COLLECTION [--force]',
  '  rebuild --into: rebuild into that scratch collection (dropped first) and leave the live one alone',
  '  scratch: the scratch collections rebuilds made and left (--into) or died writing',
  '  drop: drops a scratch collection; --force also one no rebuild recorded, or one a rebuild is still writing.',
  "        Relay's own collections (the live read models among them) are never dropped.",
].join('\n');

export async function projections(args: string[]): Promise<number> {
  const usage = PROJECTIONS_USAGE;
  if (asksForHelp(args)) {
    console.log(usage);
    return 0;
  }
  const parsed = parseOrExplain(args, { into: { type: 'string' }, json: { type: 'boolean' }, force: { type: 'boolean' } }, usage);
  if (!parsed) return EXIT_USAGE;
  const { positionals, values } = parsed;
  const [verb] = positionals;
  const refuse = (problem: string) => {
    console.error(`relay: ${problem}\n\n${usage}`);
    return EXIT_USAGE;
  };
  if (verb === 'scratch') {
    if (positionals.length !== 1 || values.into !== undefined || values.force) return refuse('projections scratch takes only --json');
    return listScratchCollections(Boolean(values.json));
  }
  if (verb === 'drop') {
    if (positionals.length !== 2 || values.into !== undefined || values.json) return refuse('projections drop takes one collection and --force');
    const problem = collectionNameProblem(positionals[1]);
    if (problem) return refuse(problem);
    return dropScratchCollection(positionals[1], Boolean(values.force));
  }
  const name = positionals[1];
  const projection = name && Object.hasOwn(PROJECTIONS, name) ? PROJECTIONS[name] : undefined;
  if (verb !== 'rebuild' || !projection || positionals.length !== 2 || values.force) {
    console.error(usage);
    return EXIT_USAGE;
  }
  const problem = values.into === undefined ? null : scratchCollectionProblem(values.into, '--into');
  if (problem) return refuse(problem);
  const stores = await openStores(loadConfig());
  try {
    const started = Date.now();
    const result = await rebuildProjection(stores.documents, stores.events, projection, { name, into: values.into, onProgress: progressBar(process.stderr) });
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (values.json) console.log(JSON.stringify({ projection: name, ...result, seconds: Number(seconds) }));
    else {
      const skipped = result.skipped > 0 ? `; ${result.skipped} event${result.skipped === 1 ? '' : 's'} could not be applied and were skipped` : '';
      console.log(`rebuilt ${name}: ${result.events} events → ${result.documents} documents in ${result.collection}${result.swapped ? ' (swapped in)' : ''}, ${seconds} s${skipped}`);
      for (const e of result.skippedEvents) console.error(`skipped ${e.type} ${e.streamId}@${e.revision} (event ${e.eventId}): ${e.error}`);
      if (result.skipped > result.skippedEvents.length) console.error(`… and ${result.skipped - result.skippedEvents.length} more`);
      if (result.skipped > 0) console.error(`they are parked: relay parked list --processor rebuild:${name}`);
      if (!result.swapped) console.error(`drop it when done: relay projections drop ${result.collection}`);
    }
    // The rebuild finished; skipped events are reported, not a failure of the command.
    return 0;
  } finally {
    await stores.close();
  }
}

async function listScratchCollections(json: boolean): Promise<number> {
  const stores = await openStores(loadConfig());
  try {
    const list = await listScratch(stores.documents);
    if (json) {
      for (const r of list) console.log(JSON.stringify({ collection: r._id, projection: r.projection, state: r.state, createdAt: r.createdAt, builtAt: r.builtAt }));
    } else if (list.length === 0) console.error('(no scratch collections)');
    else for (const r of list) console.log(`${r._id}  ${r.projection}  ${r.state}  since ${r.createdAt}${r.builtAt ? `, built ${r.builtAt}` : ''}`);
    return 0;
  } finally {
    await stores.close();
  }
}

async function dropScratchCollection(collection: string, force: boolean): Promise<number> {
  const stores = await openStores(loadConfig());
  try {
    const outcome = await dropScratch(stores.documents, collection, { force });
    if (!outcome.dropped) {
      console.error(`relay: not dropped: ${outcome.reason}`);
      return 1;
    }
    console.log(`dropped ${collection}${outcome.scratch ? ` (scratch collection of ${outcome.scratch.projection})` : ''}`);
    return 0;
  } finally {
    await stores.close();
  }
}

const EVENTS_USAGE = [
  'usage: relay events [--after POSITION] [--prefix STREAM_PREFIX]... [--type EVENT_TYPE_PREFIX]... [--limit N] [--follow]',
  '       relay events --stream STREAM_ID|EMAIL_ID [--from REVISION] [--limit N]',
  'Prints one JSON object per line: {id, streamId, revision, position, type, data, metadata, recordedAt}.',
].join('\n');

/** Why `--stream GIVEN` found nothing, and which stream (or prefix) to ask for instead. */
function noStreamHint(given: string, stream: string): string {
  const kinds = `streams are ${EMAIL_STREAM_PREFIX}<emailId> (or just the email id) and ${USAGE_STREAM_PREFIX}<workspaceId>-<YYYY-MM>`;
  if (stream !== given) return `no email ${given} here: its stream ${stream} has no events`;
  if (/^ws_[A-Za-z0-9_-]+$/.test(given)) {
    return `a workspace has no stream of its own; its usage is counted in ${USAGE_STREAM_PREFIX}${given}-<YYYY-MM>: relay events --prefix ${USAGE_STREAM_PREFIX}${given}-`;
  }
  if (/^(prj|dom|key|usr|whe)_[A-Za-z0-9_-]+$/.test(given)) return `${given} is not a stream: only emails and workspace usage have streams (${kinds})`;
  return `stream ${JSON.stringify(given)} has no events; ${kinds}; relay events --prefix PREFIX lists streams by prefix`;
}

export async function events(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(EVENTS_USAGE);
    return 0;
  }
  if (args[0] === 'schema') {
    if (args.length > 1) {
      console.error(`relay: events schema takes no arguments\n\n${EVENTS_USAGE}`);
      return EXIT_USAGE;
    }
    // The event catalog needs no store: it is generated from the event schemas.
    console.log(JSON.stringify(asyncApiDocument(), null, 2));
    return 0;
  }
  const parsed = parseOrExplain(args, {
    stream: { type: 'string' },
    after: { type: 'string' },
    from: { type: 'string' },
    prefix: { type: 'string', multiple: true },
    type: { type: 'string', multiple: true },
    limit: { type: 'string' },
    follow: { type: 'boolean' },
  }, EVENTS_USAGE);
  if (!parsed) return EXIT_USAGE;
  const { values, positionals } = parsed;
  const refuse = (problem: string) => {
    console.error(`relay: ${problem}\n\n${EVENTS_USAGE}`);
    return EXIT_USAGE;
  };
  if (positionals.length) return refuse(`unexpected argument ${JSON.stringify(positionals[0])}`);
  if (values.limit !== undefined && !/^[1-9]\d{0,15}$/.test(values.limit)) return refuse(`--limit must be a whole number from 1, got ${JSON.stringify(values.limit)}`);
  if (values.from !== undefined && !/^\d{1,16}$/.test(values.from)) return refuse(`--from must be a stream revision (0, 1, 2, …), got ${JSON.stringify(values.from)}`);
  if (values.stream !== undefined && values.stream === '') return refuse('--stream needs a stream id');
  if (values.stream && (values.follow || values.after || values.prefix || values.type)) return refuse('--stream reads one stream: it takes only --from and --limit');
  if (!values.stream && values.from !== undefined) return refuse('--from goes with --stream; use --after for the global order');
  const limit = values.limit === undefined ? Infinity : Number(values.limit);
  const stores = await openStores(loadConfig());
  const write = (line: unknown) => new Promise<void>((resolve) => (process.stdout.write(`${JSON.stringify(line)}\n`) ? resolve() : process.stdout.once('drain', resolve)));
  try {
    let printed = 0;
    if (values.stream) {
      // An email id names its stream: `relay events --stream em_…` reads `email-em_…`.
      const stream = /^em_[A-Za-z0-9_-]+$/.test(values.stream) ? emailStreamId(values.stream) : values.stream;
      const fromRevision = Number(values.from ?? 0);
      const found = await stores.events.readStream(stream, { fromRevision, maxCount: Number.isFinite(limit) ? limit : undefined });
      for (const e of found) await write(e);
      if (found.length > 0) return 0;
      // Nothing to print: say why, on stderr, rather than leave the operator with silence.
      if (fromRevision > 0 && (await stores.events.readStream(stream, { maxCount: 1 })).length > 0) {
        console.error(`(stream ${stream} has no events from revision ${fromRevision})`);
        return 0;
      }
      console.error(`relay: ${noStreamHint(values.stream, stream)}`);
      return 1;
    }
    const filter = { streamPrefixes: values.prefix, eventTypePrefixes: values.type };
    let after: string | null = values.after ?? null;
    // Positions are the store's own format: it tells whether --after is one of them
    // (adapters refuse arguments they did not hand out with a TypeError).
    try {
      await stores.events.readAll({ after, maxCount: 0, filter });
    } catch (error) {
      if (error instanceof TypeError) return refuse(`--after/--prefix/--type: ${error.message}`);
      throw error;
    }
    for (;;) {
      const batch = await stores.events.readAll({ after, maxCount: Math.min(500, limit - printed), filter });
      for (const e of batch) await write(e);
      printed += batch.length;
      if (batch.length > 0) after = batch[batch.length - 1].position;
      if (printed >= limit || batch.length === 0) break;
    }
    if (!values.follow || printed >= limit) return 0;
    await new Promise<void>((resolve) => {
      const subscription = stores.events.subscribeAll({ after, filter }, async (e) => {
        await write(e);
        if (++printed >= limit) void subscription.stop().then(resolve);
      });
      const stop = () => void subscription.stop().then(resolve);
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    return 0;
  } finally {
    await stores.close();
  }
}
