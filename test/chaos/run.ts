// npm run chaos -- [--emails N] [--rate N] [--kill-every S] [--seed N] [--duration S] [--spare-senders] [--endpoints all,problems] [--drain S] [--keep]
// Kills random parts of a distributed Relay while it sends and checks that nothing was lost
// (docs/operations.md, "Chaos"). Exits 1 when a check fails; the seed replays the kill schedule.
import { parseArgs } from 'node:util';
import { ENDPOINTS, runChaos } from './chaos.ts';

const { values } = parseArgs({
  options: {
    emails: { type: 'string', default: '1000' },
    rate: { type: 'string' },
    duration: { type: 'string' },
    'kill-every': { type: 'string', default: '5' },
    seed: { type: 'string' },
    'spare-senders': { type: 'boolean', default: false },
    drain: { type: 'string' },
    endpoints: { type: 'string', default: 'all,problems' },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log([
    'usage: npm run chaos -- [options]',
    '  --emails N          emails to send (default 1000)',
    '  --rate N            emails per second (default 10), or',
    '  --duration S        seconds to send them over (rate = emails / duration)',
    '  --kill-every S      mean seconds between kills (default 5; each gap 0.5 to 1.5 times it)',
    '  --seed N            the kill schedule\'s seed (default: random, printed)',
    '  --spare-senders     never kill the sender',
    '  --endpoints LIST    webhook endpoints to create: all (every event type), problems (bounced, failed, suppressed); default both',
    '  --drain S           how long the pipeline may take to drain after sending (default 120 + emails / 50)',
    '  --keep              keep the data directory and every part\'s output (kept anyway when a check fails)',
    'needs RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL (eval "$(bash infra/engines/engines.sh up)")',
  ].join('\n'));
  process.exit(0);
}
const number = (name: string, value: string | undefined): number | undefined => {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`--${name} must be a positive number`);
    process.exit(2);
  }
  return n;
};
const emails = Math.round(number('emails', values.emails)!);
const duration = number('duration', values.duration);
const endpoints = values.endpoints.split(',').map((name) => name.trim());
for (const name of endpoints) {
  if (!Object.hasOwn(ENDPOINTS, name)) {
    console.error(`--endpoints: ${name} is not one of ${Object.keys(ENDPOINTS).join(', ')}`);
    process.exit(2);
  }
}
const seed = number('seed', values.seed) ?? Math.floor(Math.random() * 2 ** 31);
const result = await runChaos({
  emails,
  ratePerSecond: duration ? emails / duration : (number('rate', values.rate) ?? 10),
  killIntervalMs: number('kill-every', values['kill-every'])! * 1000,
  seed,
  senderKills: !values['spare-senders'],
  drainTimeoutMs: (number('drain', values.drain) ?? 120 + emails / 50) * 1000,
  keep: values.keep,
  endpoints: endpoints as Array<keyof typeof ENDPOINTS>,
  log: (line) => console.log(line),
});
console.log(result.summary);
console.log(`replay: npm run chaos -- --emails ${emails} --${duration ? `duration ${duration}` : `rate ${values.rate ?? 10}`} --kill-every ${values['kill-every']} --seed ${seed}${values['spare-senders'] ? ' --spare-senders' : ''} --endpoints ${values.endpoints}`);
process.exit(result.ok ? 0 : 1);
