// Matching a host against a certificate's DNS-IDs as infra/mail/certificate-dns-ids.ts does it
// for MTA-STS (RFC 8461 3.3, 4.2; RFC 6125 6.4): only subjectAltName dNSNames count, a wildcard
// only as the whole leftmost label standing for one label. Certificates made by openssl with
// exactly the names of each case; over real TLS: test/mta-sts-certificate-names.int.test.ts.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { X509Certificate } from 'node:crypto';
import { certificateNamesHost, dnsIdIdentityError } from '../infra/mail/certificate-dns-ids.ts';
import { issueNamed } from './support/certificate-names.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';

const test = suite<{ ca: TestCa }>('certificate DNS-IDs');

test.before((ctx) => {
  ctx.ca = makeTestCa();
});
test.after((ctx) => ctx.ca.remove());

const presented = (ca: TestCa, names: { cn: string; san?: string[] }) => {
  const x509 = new X509Certificate(issueNamed(ca, names).cert);
  return { raw: x509.raw, subjectaltname: x509.subjectAltName };
};

test('given a DNS-ID, when matched against a host, then only an equal name or a whole-leftmost-label wildcard for one label names it', ({ ca }) => {
  const cases: Array<[string, string, boolean]> = [
    ['mx.example.com', 'mx.example.com', true],
    ['mx.example.com', 'MX.Example.COM', true], // ASCII case-insensitive
    ['mx.example.com.', 'mx.example.com', true], // a final dot on the host
    ['mx.example.com', '*.example.com', true],
    ['mx.bücher.example', 'mx.xn--bcher-kva.example', true], // a Unicode host by its A-label form
    ['example.com', '*.example.com', false], // no label for the wildcard
    ['a.b.example.com', '*.example.com', false], // two labels
    ['mx.example.com', 'm*.example.com', false], // partial wildcards name nothing
    ['mx.example.com', '*x.example.com', false],
    ['axxb.example.com', 'a*b.example.com', false],
    ['x.y.example.com', 'x.*.example.com', false], // not the leftmost label
    ['example.com', '*.com', false], // two labels after the wildcard at least
    ['mx.example.com', 'mx.example.org', false],
    ['127.0.0.1', '127.0.0.1', false], // an IP address is no DNS-ID's
  ];
  for (const [host, id, names] of cases) {
    assert.is(certificateNamesHost(presented(ca, { cn: 'unrelated.test', san: [`DNS:${id}`] }), host), names, `${id} names ${host}: ${!names}`);
  }
});

test('given a certificate without a DNS-ID, when checked, then it names no host, whatever its CN', ({ ca }) => {
  for (const names of [{ cn: 'mx.example.com' }, { cn: '*.example.com' }, { cn: 'mx.example.com', san: ['IP:127.0.0.1'] }]) {
    const cert = presented(ca, names);
    assert.not.ok(certificateNamesHost(cert, 'mx.example.com'), JSON.stringify(names));
    const error = dnsIdIdentityError('mx.example.com', cert) as Error & { code?: string };
    assert.is(error?.code, 'ERR_TLS_CERT_ALTNAME_INVALID');
    assert.match(error.message, /^certificate does not name mx\.example\.com: /);
  }
  assert.is(dnsIdIdentityError('mx.example.com', presented(ca, { cn: 'x', san: ['DNS:*.example.com'] })), undefined);
});

test('given bytes that are no certificate, when checked, then they name nothing', () => {
  assert.not.ok(certificateNamesHost({ raw: Buffer.from('not a certificate') }, 'mx.example.com'));
});

test.run();
