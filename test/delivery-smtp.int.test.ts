// Delivery through a smarthost on the embedded stores (test/support/delivery-smtp-suite.ts).
import { deliverySmtpSuite } from './support/delivery-smtp-suite.ts';

deliverySmtpSuite('embedded', () => ({}));
