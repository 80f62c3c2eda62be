// A real HTTPS server on loopback that plays every `mta-sts.<domain>` policy host of a test:
// it answers GET /.well-known/mta-sts.txt with the policy set for the Host header's domain,
// with a certificate from the test CA naming those hosts (as text/plain unless told otherwise),
// and counts the fetches.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';

export interface PolicyServer {
  port: number;
  /** Policy file per domain (the part after `mta-sts.`); a missing one answers 404. */
  policies: Map<string, string>;
  /** Content-Type per domain instead of text/plain; null: none sent. */
  contentTypes: Map<string, string | null>;
  /** Requests per domain. */
  fetches: Map<string, number>;
  close(): Promise<void>;
}

export async function startPolicyServer(tls: { key: string; cert: string }, port = 0): Promise<PolicyServer> {
  const policies = new Map<string, string>();
  const contentTypes = new Map<string, string | null>();
  const fetches = new Map<string, number>();
  const server: Server = createServer({ key: tls.key, cert: tls.cert }, (request, response) => {
    const domain = (request.headers.host ?? '').replace(/:\d+$/, '').replace(/^mta-sts\./, '');
    fetches.set(domain, (fetches.get(domain) ?? 0) + 1);
    const policy = policies.get(domain);
    if (request.url !== '/.well-known/mta-sts.txt' || policy === undefined) {
      response.writeHead(404).end();
      return;
    }
    const type = contentTypes.has(domain) ? contentTypes.get(domain) : 'text/plain';
    response.writeHead(200, type === null ? {} : { 'content-type': type }).end(policy);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    policies,
    contentTypes,
    fetches,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

export const policyText = (mode: 'enforce' | 'testing' | 'none', mx: string[], maxAge = 86400): string =>
  ['version: STSv1', `mode: ${mode}`, ...mx.map((m) => `mx: ${m}`), `max_age: ${maxAge}`].join('\r\n') + '\r\n';
