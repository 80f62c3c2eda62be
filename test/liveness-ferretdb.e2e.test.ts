// Liveness through an outage of the document store: a FerretDB server of this test's own
// (never the shared one) is halted and started again on its data. Nothing can be admitted
// meanwhile (keys, rate limits and read models live there); what was admitted before is
// delivered once, and every part runs again after (test/contracts/liveness.contract.ts).
import { livenessContract } from './contracts/liveness.contract.ts';
import { startPrivateFerretDb, type PrivateEngine } from './support/private-engine.ts';

let ferretdb: PrivateEngine | null = null;

livenessContract({
  name: 'the FerretDB server goes away and comes back',
  async setUp() {
    ferretdb = await startPrivateFerretDb();
    return { env: { RELAY_MONGODB_URL: new URL('relay_liveness', ferretdb.address).toString() } };
  },
  begin: () => ferretdb!.halt(),
  end: () => ferretdb!.resume(),
  tearDown: async () => {
    await ferretdb?.stop();
    ferretdb = null;
  },
  admitsDuring: false,
  notReadyDuring: ['documentStore'],
}, process.env.RELAY_MONGODB_URL ? undefined : 'the engines are not installed here (CI starts them: eval "$(bash infra/engines/engines.sh up)"); this test starts a FerretDB server of its own from the same install');
