// Template sends (POST /v1/emails with `template`) on the embedded adapters;
// test/templates.distributed.int.test.ts runs the same suite on the distributed document store.
import { templateSendSuite } from './support/template-send-suite.ts';

templateSendSuite('embedded');
