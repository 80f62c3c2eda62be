// What deciding and folding one charge costs as a workspace's month fills up (the usage ledger
// does both for every admission: apps/services/usage-ledger.ts, domain/usage/quota.ts). For each
// month size, the CPU per charge of the domain's fold, and of a fold that copies the map of
// charged emails each time (what the state did before it kept them in ChargedEmails,
// domain/usage/charged-emails.ts: once in the decision and once more in the fold; the reference
// copies once, so it understates the old cost by about half), in the same run. Flat is the aim: an admission must not cost more on the 31st than on the 1st.
//   node test/bench/usage-fold.bench.ts        (or: npm run bench -- usage-fold)
//   BENCH_USAGE_SIZES=1000,10000,100000,1000000 BENCH_USAGE_CHARGES=2000
import { cpuUsage } from 'node:process';
import { decideCharge, decideCharges, DEFAULT_ALLOWANCES, foldUsage, initialUsageState, type ChargeRecipients, type UsageEvent, type UsageState } from '../../domain/usage/quota.ts';

const SIZES = (process.env.BENCH_USAGE_SIZES ?? '1000,10000,100000,1000000').split(',').map(Number);
const CHARGES = Number(process.env.BENCH_USAGE_CHARGES ?? 2000);
const MONTH = '2026-11';
const allowances = { ...DEFAULT_ALLOWANCES, workspaceRecipients: 1e12 };

const command = (i: number): ChargeRecipients => ({
  type: 'ChargeRecipients', month: MONTH, emailId: `em_${i.toString(36).padStart(20, '0')}`, fingerprint: 'f0e1d2c3b4a5',
  apiKeyId: `key_${i % 4}`, developmentKey: false, recipients: 1, occurredAt: '2026-11-27T10:00:00.000Z', allowances,
});

function monthOf(size: number): UsageState {
  const events = decideCharges(Array.from({ length: size }, (_, i) => command(i)), initialUsageState(MONTH)).events;
  return foldUsage(events, initialUsageState(MONTH));
}

/** The charged emails as they were kept: a new map of every charge per fold. */
class CopiedCharges implements Iterable<string> {
  readonly #map: Map<string, number>;
  constructor(map: Map<string, number>) {
    this.#map = map;
  }
  get size(): number {
    return this.#map.size;
  }
  recipientsOf(emailId: string): number | undefined {
    return this.#map.get(emailId);
  }
  has(emailId: string): boolean {
    return this.#map.has(emailId);
  }
  [Symbol.iterator](): Iterator<string> {
    return this.#map.keys();
  }
}

function copyingFold(events: UsageEvent[], state: UsageState): UsageState {
  const charged = new Map<string, number>();
  for (const emailId of state.charged) charged.set(emailId, state.charged.recipientsOf(emailId)!);
  for (const { data } of events) charged.set(data.emailId, (charged.get(data.emailId) ?? 0) + data.recipients);
  return { ...state, charged: new CopiedCharges(charged) as unknown as UsageState['charged'] };
}

function cpuMsPerCharge(charges: number, run: (charges: number) => void): number {
  const start = cpuUsage();
  run(charges);
  const used = cpuUsage(start);
  return (used.user + used.system) / 1000 / charges;
}

console.log(`usage fold: node ${process.version}; ${CHARGES} charges decided and folded one at a time onto a month of each size`);
console.log('month size | CPU per charge (ChargedEmails) | CPU per charge (copying the map) | ratio');
for (const size of SIZES) {
  const base = monthOf(size);
  const grown = cpuMsPerCharge(CHARGES, (charges) => {
    let state = base;
    for (let i = 0; i < charges; i++) state = foldUsage(decideCharges([command(size + i)], state).events, state);
  });
  // Fewer rounds for large months: each copies the whole month.
  const copying = cpuMsPerCharge(Math.max(20, Math.min(CHARGES, Math.round(2e7 / size))), (charges) => {
    let state = base;
    for (let i = 0; i < charges; i++) {
      const events = decideCharge(command(size + i), state);
      state = copyingFold(events, state);
    }
  });
  console.log(`${size.toLocaleString('en-US').padStart(10)} | ${grown.toFixed(4)} ms | ${copying.toFixed(4)} ms | ${(copying / grown).toFixed(1)}×`);
}
