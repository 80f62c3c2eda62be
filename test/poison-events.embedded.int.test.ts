// No event stops a consumer group, on the embedded stores (test/support/poison-suite.ts).
import { poisonSuite } from './support/poison-suite.ts';

poisonSuite('embedded', () => ({}));
