// The template endpoints on the embedded adapters; test/templates.distributed.int.test.ts runs
// the same suite on the distributed document store.
import { templateApiSuite } from './support/template-api-suite.ts';

templateApiSuite('embedded');
