// `relay projections rebuild <name>` and `relay events`: replay and export for analysts and ops.
import { parseArgs } from 'node:util';
import { loadConfig } from '../../infra/config.ts';
import { openStores } from '../runtime.ts';
import { PROJECTIONS } from '../services/projection-registry.ts';
import { rebuildProjection, type RebuildProgress } from '../services/rebuild.ts';

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

export async function projections(args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({ args, allowPositionals: true, options: { into: { type: 'string' }, json: { type: 'boolean' } } });
  const [verb, name] = positionals;
  const projection = name ? PROJECTIONS[name] : undefined;
  if (verb !== 'rebuild' || !projection || positionals.length !== 2) {
    console.error(`usage: relay projections rebuild <${Object.keys(PROJECTIONS).join('|')}> [--into COLLECTION] [--json]`);
    return 2;
  }
  const stores = await openStores(loadConfig());
  try {
    const started = Date.now();
    const result = await rebuildProjection(stores.documents, stores.events, projection, { into: values.into, onProgress: progressBar(process.stderr) });
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (values.json) console.log(JSON.stringify({ projection: name, ...result, seconds: Number(seconds) }));
    else console.log(`rebuilt ${name}: ${result.events} events → ${result.documents} documents in ${result.collection}${result.swapped ? ' (swapped in)' : ''}, ${seconds} s`);
    return 0;
  } finally {
    await stores.close();
  }
}

export async function events(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      stream: { type: 'string' },
      after: { type: 'string' },
      from: { type: 'string' },
      prefix: { type: 'string', multiple: true },
      type: { type: 'string', multiple: true },
      limit: { type: 'string' },
      follow: { type: 'boolean' },
    },
  });
  const limit = values.limit === undefined ? Infinity : Number(values.limit);
  if (positionals.length || !(limit > 0) || (values.stream && (values.follow || values.after || values.prefix || values.type))) {
    console.error([
      'usage: relay events [--after POSITION] [--prefix STREAM_PREFIX]... [--type EVENT_TYPE_PREFIX]... [--limit N] [--follow]',
      '       relay events --stream STREAM_ID [--from REVISION] [--limit N]',
      'Prints one JSON object per line: {id, streamId, revision, position, type, data, metadata, recordedAt}.',
    ].join('\n'));
    return 2;
  }
  const stores = await openStores(loadConfig());
  const write = (line: unknown) => new Promise<void>((resolve) => (process.stdout.write(`${JSON.stringify(line)}\n`) ? resolve() : process.stdout.once('drain', resolve)));
  try {
    let printed = 0;
    if (values.stream) {
      for (const e of await stores.events.readStream(values.stream, { fromRevision: Number(values.from ?? 0), maxCount: Number.isFinite(limit) ? limit : undefined })) await write(e);
      return 0;
    }
    const filter = { streamPrefixes: values.prefix, eventTypePrefixes: values.type };
    let after: string | null = values.after ?? null;
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
