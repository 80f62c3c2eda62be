// The conformance suite of the send/read contract (spec: SendEmail, Mailbox, SendResult,
// EmailSummary, EmailDetail, Authentication, Errors, Limits), one suite per section, each
// rule tested at its boundary. A test file runs them all against one harness.
import type { Test } from 'uvu';
import { skippableSuite } from '../support/skippable-suite.ts';
import type { HarnessRef } from './harness.ts';
import { authenticationSuite } from './authentication.ts';
import { detailSuite } from './detail.ts';
import { errorsSuite } from './errors.ts';
import { headersSuite } from './headers.ts';
import { idempotencySuite } from './idempotency.ts';
import { listSuite } from './list.ts';
import { mailboxSuite } from './mailbox.ts';
import { quotasSuite } from './quotas.ts';
import { rateLimitsSuite } from './rate-limits.ts';
import { recipientsSuite } from './recipients.ts';
import { requestSizeSuite } from './request-size.ts';
import { sendEmailSuite } from './send-email.ts';
import { senderSuite } from './sender.ts';
import { suppressionSuite } from './suppression.ts';
import { tagsSuite } from './tags.ts';

export type ConformanceSuite = (test: Test, harness: HarnessRef) => void;

export const SECTIONS: Array<[string, ConformanceSuite]> = [
  ['Mailbox', mailboxSuite],
  ['SendEmail fields', sendEmailSuite],
  ['Recipients', recipientsSuite],
  ['Headers', headersSuite],
  ['Tags', tagsSuite],
  ['Authentication', authenticationSuite],
  ['Sender domain and development recipients', senderSuite],
  ['Suppression', suppressionSuite],
  ['Idempotency', idempotencySuite],
  ['Rate limits', rateLimitsSuite],
  ['Quotas', quotasSuite],
  ['List emails', listSuite],
  ['Email detail', detailSuite],
  ['Errors', errorsSuite],
  ['Request size', requestSizeSuite],
];

/** Registers and runs every section against the harness; `skipReason` registers them all as skipped. */
export function runConformance(mode: string, harness: HarnessRef, skipReason?: string): void {
  SECTIONS.forEach(([name, register], i) => {
    const test = skippableSuite(`${name} [${mode}]`, skipReason) as Test;
    register(test, harness);
    if (i === SECTIONS.length - 1) test.after(() => harness.close());
    test.run();
  });
}
