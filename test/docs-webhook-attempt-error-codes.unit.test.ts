// Every value a webhook attempt log's `errorCode` can hold (the metric's results, which the
// attempts record) is in the list docs/webhooks.md sends customers to
// (apps/api/INTERFACE-DECISIONS.md, "Attempt log `errorCode` values: …"), `signing_failed`
// included: a client handling the documented values must not meet an undocumented one on the
// very failure that needs the operator (a lost RELAY_SECRET_KEY_PREVIOUS).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { WEBHOOK_RESULT_LABELS } from '../apps/services/webhooks/attempt-result.ts';
import { readDoc } from './support/doc-blocks.ts';

const test = suite('INTERFACE-DECISIONS.md: every webhook attempt errorCode is documented');

test('the documented errorCode values include every code an attempt log can record', () => {
  const doc = readDoc('apps/api/INTERFACE-DECISIONS.md').replace(/\s+/g, ' ');
  const at = doc.indexOf('Attempt log `errorCode` values:');
  assert.ok(at >= 0, 'the list is in INTERFACE-DECISIONS.md');
  const sentence = doc.slice(at, doc.indexOf('Delivery `status`', at));
  const documented = new Set([...sentence.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]));
  // What an attempt log's errorCode can be: the egress's codes for a non-2xx answer
  // (infra/ports/http-egress.ts: http_error, redirect) and every error code /metrics counts an
  // attempt under (the labels that are not a status class).
  const recorded = ['http_error', 'redirect', ...WEBHOOK_RESULT_LABELS.filter((label) => !label.endsWith('xx'))];
  const missing = recorded.filter((code) => !documented.has(code));
  assert.equal(missing, [], `errorCode values Relay records that the documentation does not list: ${missing.join(', ')}`);
});

test.run();
