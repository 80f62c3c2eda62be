// The template suites (endpoints and sends) on the distributed document store from
// RELAY_MONGODB_URL (FerretDB from infra/engines, or MongoDB), and EventStoreDB when
// RELAY_EVENTSTORE_URL is set too. Without RELAY_MONGODB_URL every test is registered as skipped.
import { templateApiSuite } from './support/template-api-suite.ts';
import { templateSendSuite } from './support/template-send-suite.ts';
import { distributedSkipReason } from './support/templates.ts';

const skipReason = distributedSkipReason();
templateApiSuite('distributed', skipReason);
templateSendSuite('distributed', skipReason);
