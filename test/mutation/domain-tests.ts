// The unit tests StrykerJS runs against each mutant of domain/ (`npm run mutate`,
// stryker.config.json, test/mutation/uvu-runner.ts): the given/when/then tests of the domain
// rules, fastest first.
export const DOMAIN_TESTS = [
  'text-length', 'rate-limits', 'usage-quota', 'verp', 'management-rules', 'webhook-delivery-rules', 'send-request', 'templates-syntax',
  'sending-domain', 'email-admission', 'email-outcomes',
  'email-delivery', 'email-feedback', 'email-view', 'feedback-classify', 'outcomes-agreement', 'suppression-upcast',
].map((name) => `test/${name}.unit.test.ts`);
