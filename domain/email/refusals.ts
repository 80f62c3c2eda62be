// What a permanent refusal (a 5xx, or a final local verdict such as a null MX) from the next
// hop means for one recipient: one rule for every transport, with the same wording rules that
// classify bounce reports (domain/feedback/classify.ts), so a reply means the same whether it
// arrives at once from the recipient's MX, from a smarthost, or later in a DSN.
//
// - hard_bounced: the reply condemns the address (unknown user 5.1.1, no such domain 5.1.2,
//   null MX 5.1.10, no usable MX 5.4.4, or the wordings of those), given at RCPT TO, or with an
//   X.1.x status after DATA. The address is suppressed.
// - otherwise the refusal is about this message or about Relay (spam, policy, size, relaying,
//   a refused return path): who refused decides the name. The recipient's own server (`mx`):
//   `soft_bounced`, as the same reply in a DSN would be. Relay's provider (`smtp`): `rejected`,
//   the provider would not take the message (failureCode provider_rejected).
import { classifyText } from '../feedback/classify.ts';
import type { Status } from './status.ts';

export interface Refusal {
  smtpCode: number | null;
  enhancedCode: string | null;
  response: string;
  /** Where the transport got it: dns, connection, tls, mail_from, rcpt_to, data. */
  stage?: string;
}

/** Whether the next hop is the recipient's own server (`mx`) or Relay's provider (a smarthost, the outbox). */
export type NextHop = 'recipient_server' | 'provider';

export const nextHopOf = (transport: string): NextHop => (transport === 'mx' ? 'recipient_server' : 'provider');

/** Stages before RCPT TO: a refusal there refused Relay or its return path, never the recipient. */
const BEFORE_RCPT = new Set(['connection', 'tls', 'mail_from']);

export function condemnsAddress(refusal: Refusal): boolean {
  if (refusal.stage && BEFORE_RCPT.has(refusal.stage)) return false;
  const text = refusal.smtpCode !== null && !refusal.response.startsWith(String(refusal.smtpCode)) ? `${refusal.smtpCode} ${refusal.response}` : refusal.response;
  const verdict = classifyText(text, { status: refusal.enhancedCode });
  if (verdict.outcome !== 'hard_bounced') return false;
  // After DATA the address was accepted at RCPT: only an X.1.x status still condemns it.
  if (refusal.stage === 'data') return /^5\.1\./.test(verdict.status ?? '');
  return true;
}

export function refusalStatus(refusal: Refusal, nextHop: NextHop): Status {
  if (condemnsAddress(refusal)) return 'hard_bounced';
  return nextHop === 'recipient_server' ? 'soft_bounced' : 'rejected';
}
