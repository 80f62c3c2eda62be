// `relay outbox list` and `relay outbox show <emailId>`: what the outbox transport wrote.
import { loadConfig } from '../../infra/config.ts';
import { outboxDirOf } from '../runtime.ts';
import { outboxMessage, outboxMessages } from '../services/outbox.ts';
import { asksForHelp, countProblem, EXIT_USAGE, parseOrExplain } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printable } from './printable.ts';

const USAGE = [
  'usage: relay outbox list [--limit N]      the newest messages in $RELAY_DATA_DIR/outbox',
  '       relay outbox show <emailId>        print one message exactly as written (.eml, DKIM-signed)',
].join('\n');

const refuse = (problem: string): number => {
  console.error(`relay: ${problem}\n\n${USAGE}`);
  return EXIT_USAGE;
};

export async function outbox(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  const parsed = parseOrExplain(args, { limit: { type: 'string' } }, USAGE);
  if (!parsed) return EXIT_USAGE;
  const { values, positionals: [verb, ...rest] } = parsed;
  if (verb !== 'list' && verb !== 'show') return refuse(verb === undefined ? 'which one: list or show?' : `unknown subcommand ${JSON.stringify(verb)}`);
  if (verb === 'list' && rest.length > 0) return refuse(`unexpected argument ${JSON.stringify(rest[0])}`);
  if (verb === 'show') {
    if (rest.length === 0) return refuse('show needs the id of an email (relay outbox list)');
    if (rest.length > 1) return refuse(`unexpected argument ${JSON.stringify(rest[1])}`);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(rest[0])) return refuse(`${JSON.stringify(rest[0])} is not an email id`);
    if (values.limit !== undefined) return refuse('--limit goes with list');
  }
  const limitProblem = values.limit === undefined ? null : countProblem('--limit', values.limit);
  if (limitProblem !== null) return refuse(limitProblem);
  const limit = Number(values.limit ?? 20);
  const config = loadConfig();
  // The documents and the outbox's files only: reading opens no services, whose secret key
  // would be made as a new file where the Relay's key is RELAY_SECRET_KEY and the shell lacks it.
  const stores = await openExistingStores(config, ['documents']);
  if (!stores) return 1;
  const outboxDir = outboxDirOf(config);
  try {
    if (verb === 'show') {
      const copy = await outboxMessage(stores.documents, outboxDir, rest[0], new Date());
      if (copy === 'expired') {
        console.error(`relay: the content of ${rest[0]} has expired (bodies are kept for seven days); its outbox copy is deleted`);
        return 1;
      }
      if (copy === 'missing') {
        console.error(`relay: no outbox message for ${rest[0]} in ${outboxDir}`);
        return 1;
      }
      process.stdout.write(copy.found);
      return 0;
    }
    const messages = await outboxMessages(stores.documents, outboxDir, { limit });
    if (messages.length === 0) console.error(`(the outbox ${outboxDir} is empty)`);
    // Addresses and subjects are the senders': JSON.stringify escapes C0 controls, not DEL or C1 (U+009B is CSI).
    for (const m of messages) console.log(printable(`${m.emailId}  ${m.writtenAt}  ${String(m.size).padStart(7)} B  ${m.toAddresses.join(', ')}  ${JSON.stringify(m.subject ?? '')}`));
    return 0;
  } finally {
    await stores.close();
  }
}
