// The sender counts each recipient's outcome on /metrics (apps/services/delivery/outcome-report.ts):
// a soft bounce apart from a hard one. A soft bounce (a full mailbox, a policy refusal, a deferral
// past the retry window) says nothing against the address, and the bounce rate that mailbox
// providers watch, and that ops/prometheus/relay-rules.yml alerts on, counts hard bounces only.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createRelayMetrics } from '../apps/relay-metrics.ts';
import { deliveryOutcomeReport } from '../apps/services/delivery/outcome-report.ts';
import type { AdmittedMessage, DeliveryAttempted } from '../domain/email/events.ts';

test('given an mx attempt with a hard and a soft bounce, when it is reported, then each is counted under its own outcome', async () => {
  const metrics = createRelayMetrics(undefined, { process: false });
  const warned: string[] = [];
  const report = deliveryOutcomeReport({ metrics: metrics.delivery, transport: 'mx', warn: (message) => warned.push(message), error: () => {}, now: () => new Date() });
  const recipient = (index: number, status: 'hard_bounced' | 'soft_bounced', smtpCode: number, enhancedCode: string) =>
    ({ index, address: `r${index}@example.org`, status, smtpCode, enhancedCode, response: `${smtpCode} ${enhancedCode} no` });
  const outcome = {
    transport: 'mx', attempt: 1, occurredAt: '2026-11-28T10:00:01.000Z', nextAttemptAt: null, failureCode: null,
    recipients: [recipient(0, 'hard_bounced', 550, '5.1.1'), recipient(1, 'soft_bounced', 552, '5.2.2')],
  } as unknown as DeliveryAttempted['data'];
  const message = { emailId: 'em_outcomes', occurredAt: '2026-11-28T10:00:00.000Z' } as AdmittedMessage;
  report.attempted(message, outcome, [], () => 'example.org');
  const lines = (await metrics.render()).split('\n').filter((line) => line.startsWith('relay_delivery_attempts_total{'));
  assert.ok(lines.includes('relay_delivery_attempts_total{transport="mx",outcome="hard_bounced"} 1'), lines.join('\n'));
  assert.ok(lines.includes('relay_delivery_attempts_total{transport="mx",outcome="soft_bounced"} 1'), lines.join('\n'));
  assert.not.ok(lines.some((line) => line.includes('outcome="bounced"')), 'no series mixes the two');
  assert.equal(warned, ['delivery hard_bounced', 'delivery soft_bounced']);
});

test.run();
