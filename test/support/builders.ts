// Builders for domain values used across unit tests.
import type { AdmittedMessage } from '../../domain/email/events.ts';

export function admittedMessage(overrides: Partial<AdmittedMessage> = {}): AdmittedMessage {
  return {
    emailId: 'em_test1',
    projectId: 'prj_1',
    workspaceId: 'ws_1',
    apiKeyId: 'key_1',
    testMode: true,
    fingerprint: 'f1',
    idempotencyKey: null,
    from: 'Sender <sender@example.test>',
    fromAddress: 'sender@example.test',
    fromDomain: 'example.test',
    to: ['Ann <ann@example.test>'],
    toAddresses: ['ann@example.test'],
    cc: ['cc@example.test'],
    ccAddresses: ['cc@example.test'],
    bccCount: 1,
    replyTo: null,
    subject: 'Hello',
    headers: {},
    tags: { kind: 'welcome' },
    metadata: { orderId: 42 },
    template: null,
    recipientCount: 3,
    content: { keyId: 'em_test1', alg: 'A256GCM', iv: 'aXY=', data: 'ZGF0YQ==', tag: 'dGFn' },
    occurredAt: '2026-11-01T10:00:00.000Z',
    ...overrides,
  };
}
