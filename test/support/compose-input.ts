// A message input that exercises what composition gets wrong most easily: non-ASCII display
// names and subject, a quoted local display name, a subject that must be folded, custom headers.
// The suites choose their own bodies.
import type { DkimKeyPair } from '../../infra/dns/dkim-keys.ts';
import { newMessageId, type ComposeInput } from '../../infra/mail/compose.ts';

export const COMPOSE_DOMAIN = 'acme.example';
export const COMPOSE_EMAIL_ID = 'em_Q2xhdWRlLXdhcy1oZXJl';

export function awkwardComposeInput(key: DkimKeyPair, overrides: Partial<ComposeInput> = {}): ComposeInput {
  return {
    from: 'Zoë Ünicode, Ltd <hello@acme.example>',
    to: ['alice@receiver.test', '"Bob \\"the\\" Builder" <bob@receiver.test>'],
    cc: ['Çarla <carla@other.test>'],
    replyTo: 'Support <support@acme.example>',
    subject: `Grüße aus Köln — ${'a long subject that needs folding '.repeat(4)}✉️`,
    html: null,
    text: 'Hallo Welt — ünïcødé',
    headers: { 'X-Entity-Ref-ID': 'order-1234', 'List-Unsubscribe': '<https://acme.example/u/1>', 'X-Unicode': 'naïve' },
    messageId: newMessageId(COMPOSE_EMAIL_ID, COMPOSE_DOMAIN),
    date: new Date('2025-03-01T12:34:56Z'),
    dkim: { domainName: COMPOSE_DOMAIN, keySelector: key.selector, privateKey: key.privateKeyPem },
    ...overrides,
  };
}
