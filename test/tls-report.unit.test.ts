// The RFC 8460 rules of domain/delivery/tls-report.ts: reading `_smtp._tls` records and
// folding a day's session counts into one report per recipient domain.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { buildTlsReport, MAX_TLSRPT_RECORD_LENGTH, MAX_TLSRPT_RUA_LENGTH, parseTlsRptRecord, reportFileName, type TlsSessionCount } from '../domain/delivery/tls-report.ts';

const test = suite('TLS reports (RFC 8460)');

test('given _smtp._tls records, then mailto and https destinations are read, anything else refused', () => {
  assert.equal(parseTlsRptRecord('v=TLSRPTv1; rua=mailto:tls@example.com,https://reports.example.com/tls'), { mailto: ['tls@example.com'], https: ['https://reports.example.com/tls'] });
  assert.equal(parseTlsRptRecord('v=TLSRPTv1;rua=mailto:tls%2Breports@example.com'), { mailto: ['tls+reports@example.com'], https: [] });
  assert.is(parseTlsRptRecord('v=TLSRPTv1; rua=http://insecure.example.com/'), null, 'only https');
  assert.is(parseTlsRptRecord('v=spf1 -all'), null);
  assert.is(parseTlsRptRecord('v=TLSRPTv1;'), null, 'no rua');
  assert.is(parseTlsRptRecord('v=TLSRPTv1; rua=mailto:not an address'), null);
  // Decoded, an address must be a bare one as domain/mailbox.ts reads it: a comma only in a
  // quoted local part, no angle brackets, no surrounding space.
  assert.equal(
    parseTlsRptRecord('v=TLSRPTv1; rua=mailto:ops%2Cteam@example.com,mailto:%22ops%2Cteam%22@example.com,mailto:%22a%3Cb%3E%22@example.com,mailto:%3Ctls@example.com%3E,mailto:%20tls@example.com'),
    { mailto: ['"ops,team"@example.com'], https: [] },
  );
});

test(`given a record over ${MAX_TLSRPT_RECORD_LENGTH} characters, or rua entries over ${MAX_TLSRPT_RUA_LENGTH}, then the record names nothing and such entries are left out`, () => {
  const record = (length: number) => {
    const head = 'v=TLSRPTv1; rua=mailto:tls@example.com; x=';
    return head + 'y'.repeat(length - head.length);
  };
  assert.equal(parseTlsRptRecord(record(MAX_TLSRPT_RECORD_LENGTH)), { mailto: ['tls@example.com'], https: [] });
  assert.is(parseTlsRptRecord(record(MAX_TLSRPT_RECORD_LENGTH + 1)), null);
  const url = (length: number) => `https://reports.example.com/${'p'.repeat(length - 'https://reports.example.com/'.length)}`;
  assert.equal(parseTlsRptRecord(`v=TLSRPTv1; rua=${url(MAX_TLSRPT_RUA_LENGTH + 1)},mailto:tls@example.com, ${url(MAX_TLSRPT_RUA_LENGTH)}`), {
    mailto: ['tls@example.com'], https: [url(MAX_TLSRPT_RUA_LENGTH)],
  });
});

test('given mailto entries without an "@" inside them, then none is a destination', () => {
  for (const rua of ['mailto:tls.example.com', 'mailto:@example.com', 'mailto:tls@', 'mailto:tls%40example.com', `mailto:${'@'.repeat(1000)}?`]) {
    assert.is(parseTlsRptRecord(`v=TLSRPTv1; rua=${rua}`), null, rua);
  }
});

const line = (over: Partial<TlsSessionCount>): TlsSessionCount => ({
  day: '2026-11-26', domain: 'example.com',
  policy: { type: 'sts', domain: 'example.com', strings: ['version: STSv1', 'mode: enforce', 'mx: *.example.com', 'max_age: 86400'], mxHosts: ['*.example.com'] },
  result: 'success', mxHost: 'mx1.example.com', receivingIp: '192.0.2.1', sendingIp: '198.51.100.7', detail: null, count: 1, ...over,
});
const identity = { organizationName: 'Relay at example.net', contactInfo: 'tlsrpt@example.net', submitter: 'example.net' };

test('given a day of counts, when the report is built, then successes and failures are summed per policy and failures grouped', () => {
  const counts = [
    line({ count: 40 }),
    line({ mxHost: 'mx2.example.com', count: 2 }),
    line({ result: 'certificate-expired', mxHost: 'mx3.example.com', receivingIp: '192.0.2.3', detail: 'certificate has expired', count: 3 }),
    line({ result: 'certificate-expired', mxHost: 'mx3.example.com', receivingIp: '192.0.2.3', count: 4 }),
    line({ policy: { type: 'no-policy-found', domain: 'example.com', strings: [], mxHosts: [] }, result: 'starttls-not-supported', mxHost: 'old.example.com', count: 1 }),
    line({ domain: 'other.example', count: 99 }),
    line({ day: '2026-11-25', count: 99 }),
  ];
  const report = buildTlsReport('2026-11-26', 'example.com', counts, identity, 'r1');
  assert.equal(report['date-range'], { 'start-datetime': '2026-11-26T00:00:00Z', 'end-datetime': '2026-11-26T23:59:59Z' });
  assert.is(report.policies.length, 2);
  const [sts, none] = report.policies;
  assert.equal(sts.policy, { 'policy-type': 'sts', 'policy-string': line({}).policy.strings, 'policy-domain': 'example.com', 'mx-host': ['*.example.com'] });
  assert.equal(sts.summary, { 'total-successful-session-count': 42, 'total-failure-session-count': 7 });
  assert.equal(sts['failure-details'], [{
    'result-type': 'certificate-expired', 'sending-mta-ip': '198.51.100.7', 'receiving-mx-hostname': 'mx3.example.com', 'receiving-ip': '192.0.2.3',
    'failed-session-count': 7, 'failure-reason-code': 'certificate has expired',
  }]);
  assert.equal(none.policy, { 'policy-type': 'no-policy-found', 'policy-domain': 'example.com' });
  assert.equal(none.summary, { 'total-successful-session-count': 0, 'total-failure-session-count': 1 });
});

test('the report file name follows RFC 8460 5.3', () => {
  assert.is(reportFileName(identity, 'example.com', '2026-11-26', 'r1@example.net'), 'example.net!example.com!1795651200!1795737599!r1examplenet.json.gz');
});

test.run();
