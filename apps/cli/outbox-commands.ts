// `relay outbox list` and `relay outbox show <emailId>`: what the outbox transport wrote.
import { loadConfig } from '../../infra/config.ts';
import { outboxDirOf } from '../runtime.ts';
import { outboxMessage, outboxMessages } from '../services/outbox.ts';
import { asksForHelp } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printable } from './printable.ts';

const USAGE = [
  'usage: relay outbox list [--limit N]      the newest messages in $RELAY_DATA_DIR/outbox',
  '       relay outbox show <emailId>        print one message exactly as written (.eml, DKIM-signed)',
].join('\n');

export async function outbox(args: string[]): Promise<number> {
  const [verb, ...rest] = args;
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  const limitAt = rest.indexOf('--limit');
  const limit = limitAt >= 0 ? Number(rest[limitAt + 1]) : 20;
  const listArgsOk = verb === 'list' && (rest.length === 0 || (rest.length === 2 && limitAt === 0 && Number.isInteger(limit) && limit >= 1));
  const showArgsOk = verb === 'show' && rest.length === 1 && /^[A-Za-z0-9_-]{1,64}$/.test(rest[0]);
  if (!listArgsOk && !showArgsOk) {
    console.error(USAGE);
    return 2;
  }
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
