// `relay projections rebuild|scratch|drop|run`: replay for analysts and ops.
import { statSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../../infra/config.ts';
import { checkModule, runCustomProjection, type CustomProjectionModule } from '../services/custom-projection.ts';
import { PROJECTIONS } from '../services/projection-registry.ts';
import { RebuildRefusedError, rebuildProjection, scratchCollectionProblem, type RebuildProgress } from '../services/rebuild.ts';
import { collectionNameProblem, dropScratch, listScratch } from '../services/scratch-collections.ts';
import { asksForHelp, EXIT_USAGE, parseOrExplain } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printableJson } from './printable.ts';

export function progressBar(stream: NodeJS.WriteStream) {
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



const PROJECTIONS_USAGE = [
  `usage: relay projections rebuild <${Object.keys(PROJECTIONS).join('|')}> [--into COLLECTION] [--json]`,
  '       relay projections run ./MODULE.mjs [--checkpoint NAME] [--follow]',
  '       relay projections scratch [--json]',
  '       relay projections drop COLLECTION [--force]',
  '  rebuild --into: rebuild into that scratch collection (dropped first) and leave the live one alone; refused: a collection',
  '       drop refuses without --force, a swap\'s, or one built for another projection',
  '  run: feeds a module of your own (init, apply(event), flush({position, count})) the global order from its checkpoint',
  '       (NAME, default the file name), in batches of 2,000, upcast; --follow keeps it going as events come (stop: Ctrl-C)',
  '  rebuild: first finishes the catch-up a rebuild interrupted after its swap still owes (so does the projection\'s processor at start)',
  '  scratch: the scratch collections rebuilds made and left (--into) or died writing, and swaps whose catch-up is owed',
  '  drop: drops a scratch collection; --force also one no rebuild recorded or one a rebuild is still writing.',
  "        Relay's own collections (the live read models among them) are never dropped, nor a swap not renamed yet (rebuild finishes it);",
  '        --force on a swap renamed but owing its catch-up forgets its record, and that catch-up is never done.',
].join('\n');

export async function projections(args: string[]): Promise<number> {
  const usage = PROJECTIONS_USAGE;
  if (asksForHelp(args)) {
    console.log(usage);
    return 0;
  }
  if (args[0] === 'run') return runProjection(args.slice(1));
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
  const stores = await openExistingStores(loadConfig());
  if (!stores) return 1;
  // Stopped before the swap, a rebuild leaves a scratch collection (listed, dropped on request);
  // after it, the catch-up stays owed and is finished later, but the read model lags until then:
  // so the first signal while catching up lets it finish, as `relay start` stops gracefully, and a
  // second one exits at once.
  let catchingUp = false;
  let signalled = false;
  const bar = progressBar(process.stderr);
  const onProgress = (p: RebuildProgress) => {
    catchingUp = p.phase === 'catching-up';
    bar(p);
  };
  const onSignal = () => {
    if (!catchingUp || signalled) process.exit(130);
    signalled = true;
    console.error(`\nrelay: finishing the catch-up after the swap; stop again to leave it owed (relay projections rebuild ${name}, or a start of its processor, finishes it)`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const started = Date.now();
    let result;
    try {
      result = await rebuildProjection(stores.documents, stores.events, projection, { name, into: values.into, onProgress });
    } catch (error) {
      if (!(error instanceof RebuildRefusedError)) throw error;
      console.error(`relay: not rebuilt: ${error.message}`);
      return 1;
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (values.json) console.log(printableJson({ projection: name, ...result, seconds: Number(seconds) }));
    else {
      for (const scratch of result.resumed) console.error(`finished first the catch-up ${scratch} owed after its swap`);
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
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await stores.close();
  }
}

async function listScratchCollections(json: boolean): Promise<number> {
  const stores = await openExistingStores(loadConfig());
  if (!stores) return 1;
  try {
    const list = await listScratch(stores.documents);
    if (json) {
      for (const r of list) {
        const owed = r.state === 'swapped' ? { swappedAt: r.swappedAt, catchUpAfter: r.catchUpAfter ?? null } : {};
        console.log(printableJson({ collection: r._id, projection: r.projection, state: r.state, createdAt: r.createdAt, builtAt: r.builtAt, ...owed }));
      }
    } else if (list.length === 0) console.error('(no scratch collections)');
    else {
      for (const r of list) {
        const owed = r.state === 'swapped'
          ? `, swapped in ${r.swappedAt}; owes the catch-up after position ${r.catchUpAfter ?? '(none)'}: relay projections rebuild ${r.projection} (or a start of its processor) finishes it`
          : '';
        console.log(`${r._id}  ${r.projection}  ${r.state}  since ${r.createdAt}${r.builtAt ? `, built ${r.builtAt}` : ''}${owed}`);
      }
    }
    return 0;
  } finally {
    await stores.close();
  }
}

async function dropScratchCollection(collection: string, force: boolean): Promise<number> {
  const stores = await openExistingStores(loadConfig());
  if (!stores) return 1;
  try {
    const outcome = await dropScratch(stores.documents, collection, { force });
    if ('forgotten' in outcome) {
      const { projection, swappedAt } = outcome.forgotten;
      console.log(`forgot the record of ${collection}, swapped in as the ${projection} read model at ${swappedAt}; nothing dropped`);
      console.error(`relay: the catch-up it owed will not be done: the ${projection} read model may lack what its processor applied while that rebuild ran, until relay projections rebuild ${projection}`);
      return 0;
    }
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

async function runProjection(args: string[]): Promise<number> {
  const parsed = parseOrExplain(args, { checkpoint: { type: 'string' }, follow: { type: 'boolean' } }, PROJECTIONS_USAGE);
  if (!parsed) return EXIT_USAGE;
  const [file, ...extra] = parsed.positionals;
  if (!file || extra.length) {
    console.error(`relay: projections run takes one module\n\n${PROJECTIONS_USAGE}`);
    return EXIT_USAGE;
  }
  const name = parsed.values.checkpoint ?? basename(file).replace(/\.[^.]*$/, '');
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
    console.error(`relay: --checkpoint must be 1 to 64 letters, digits, '.', '_' or '-', got ${JSON.stringify(name)}\n\n${PROJECTIONS_USAGE}`);
    return EXIT_USAGE;
  }
  const module = await importProjectionModule(file);
  if (typeof module === 'number') return module;
  const stores = await openExistingStores(loadConfig());
  if (!stores) return 1;
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let shown = 0;
  try {
    const result = await runCustomProjection(stores, module, {
      name, follow: parsed.values.follow, signal: stop.signal,
      onProgress: ({ applied, position }) => {
        if (Date.now() - shown < 1000) return;
        shown = Date.now();
        console.error(`${name}: ${applied} events applied, checkpoint ${position}`);
      },
    });
    console.error(`${name}: ${result.applied} events applied after ${result.startedAfter ?? 'the beginning'}; checkpoint ${result.position ?? '(none yet)'}`);
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await stores.close();
  }
}

/**
 * The operator's projection module, or the exit code after one line on stderr: a path that
 * names no file is a usage error (2); a module that fails to load or lacks apply() is the
 * module's failure (1), told with its file name and message, never Relay's loader paths.
 */
async function importProjectionModule(file: string): Promise<CustomProjectionModule | number> {
  const path = resolve(file);
  if (!statSync(path, { throwIfNoEntry: false })?.isFile()) {
    console.error(`relay: projections run: ${file} is not a file (usage: relay projections run ./MODULE.mjs [--checkpoint NAME] [--follow])`);
    return EXIT_USAGE;
  }
  try {
    return checkModule(await import(pathToFileURL(path).href) as Record<string, unknown>, file);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    console.error(`relay: ${file}: ${message.startsWith(`${file}`) ? message.slice(file.length).replace(/^:?\s*/, '') : message}`);
    return 1;
  }
}
