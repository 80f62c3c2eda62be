// Webhooks on the embedded stores (test/support/webhooks-suite.ts).
import { webhooksSuite } from './support/webhooks-suite.ts';

webhooksSuite('embedded', () => ({}));
