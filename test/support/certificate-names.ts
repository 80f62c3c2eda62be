// Certificates from a test CA (./https-receiver.ts makeTestCa) with exactly the names a test
// chooses: a subject Common Name and any subjectAltName entries, or none at all (TestCa.issue
// always puts each host in a DNS entry, its first as the CN too). For tests of how a client
// matches a host against a certificate's names.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestCa } from './https-receiver.ts';

let issued = 0;

/**
 * A key and certificate signed by `ca`: subject `CN=<cn>`, and a subjectAltName of `san` as
 * openssl writes it (`DNS:mx.example.test`, `IP:127.0.0.1`); without `san` (or with none) the
 * certificate has no subjectAltName extension.
 */
export function issueNamed(ca: TestCa, names: { cn: string; san?: string[] }): { key: string; cert: string } {
  const n = `named${process.pid}-${++issued}`;
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: ca.dir, stdio: 'ignore' });
  // Some extension either way, so that the certificate is X.509 v3 like any real one.
  const extensions = ['basicConstraints=CA:FALSE', ...(names.san?.length ? [`subjectAltName=${names.san.join(',')}`] : [])];
  writeFileSync(join(ca.dir, `${n}.cnf`), `${extensions.join('\n')}\n`);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${names.cn}`, '-keyout', `${n}.key`, '-out', `${n}.csr`]);
  run(['x509', '-req', '-in', `${n}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-out', `${n}.pem`, '-extfile', `${n}.cnf`]);
  return { key: readFileSync(join(ca.dir, `${n}.key`), 'utf8'), cert: readFileSync(join(ca.dir, `${n}.pem`), 'utf8') };
}
