import { startDistributedHarness, basicSend } from '../conformance/harness.ts';
import { authenticateApiKey } from '../../apps/api/auth/bearer.ts';
import { RateLimiter } from '../../apps/services/rate-limits.ts';
import { UsageLedger } from '../../apps/services/usage-ledger.ts';
import { admitEmail } from '../../apps/services/admission.ts';
import { normalizeSendRequest } from '../../domain/email/send-request.ts';
const h = await startDistributedHarness(process.env.RELAY_KAFKA_BROKERS!, process.env.RELAY_MONGODB_URL!);
try {
  const t = await h.tenant();
  const ctx = h.instances[0].ctx;
  const p = await authenticateApiKey(ctx, `Bearer ${t.key.secret}`);
  console.log('auth ok', p.keyId);
  const body = basicSend(t);
  const r = await admitEmail({ events: ctx.events, documents: ctx.documents, rateLimits: new RateLimiter(ctx.documents), usage: new UsageLedger(ctx.events), now: ctx.now },
    { keyId: p.keyId, projectId: p.projectId, workspaceId: p.workspaceId, environment: p.environment }, { body, idempotencyKey: null, send: normalizeSendRequest(body as any) });
  console.log(r);
} catch (e) { console.error('ERR', e); }
await h.close();
