// A real HTTPS webhook receiver for tests: a test CA (openssl) signs a certificate for a test
// host name; the receiver records every request (headers, raw body, arrival time) and answers
// as the test says. `trustTestCa` makes this process trust the CA (in-process Relay); child
// processes get it through NODE_EXTRA_CA_CERTS (caFile).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';

export interface TestCa {
  dir: string;
  caFile: string;
  ca: string;
  /** A key and certificate for these host names, signed by the CA. */
  issue(hosts: string[]): { key: string; cert: string };
  remove(): void;
}

export function makeTestCa(): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'relay-ca-'));
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=Relay Test CA', '-keyout', 'ca.key', '-out', 'ca.pem',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  let issued = 0;
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    ca: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    issue(hosts) {
      const n = ++issued;
      writeFileSync(join(dir, `ext${n}.cnf`), `subjectAltName=${hosts.map((h) => `DNS:${h}`).join(',')}\n`);
      run(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${hosts[0]}`, '-keyout', `s${n}.key`, '-out', `s${n}.csr`]);
      run(['x509', '-req', '-in', `s${n}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-out', `s${n}.pem`, '-extfile', `ext${n}.cnf`]);
      return { key: readFileSync(join(dir, `s${n}.key`), 'utf8'), cert: readFileSync(join(dir, `s${n}.pem`), 'utf8') };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** This process's TLS clients trust the test CA from now on (as NODE_EXTRA_CA_CERTS would at start). */
export function trustTestCa(ca: TestCa): void {
  tls.setDefaultCACertificates([...tls.getCACertificates('default'), ca.ca]);
}

export interface ReceivedRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export type Answer = { status: number; headers?: Record<string, string> } | 'hang';

export interface HttpsReceiver {
  port: number;
  requests: ReceivedRequest[];
  /** Decides each answer (default 200). */
  answer: (request: ReceivedRequest) => Answer;
  close(): Promise<void>;
}

export async function startHttpsReceiver(cert: { key: string; cert: string }): Promise<HttpsReceiver> {
  const hanging = new Set<import('node:http').ServerResponse>();
  const receiver: HttpsReceiver = { port: 0, requests: [], answer: () => ({ status: 200 }), close: async () => {} };
  const server: Server = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request: ReceivedRequest = {
        path: req.url ?? '/',
        headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)])),
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      receiver.requests.push(request);
      const answer = receiver.answer(request);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(answer.status, answer.headers).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as { port: number }).port;
  receiver.close = () => new Promise<void>((resolve) => {
    for (const res of hanging) res.destroy();
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return receiver;
}
