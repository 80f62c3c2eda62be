// Fixtures for delivery tests: a tenant whose sending domain's DKIM record is served by the
// test DNS server (so an independent verifier can check signatures), helpers to send through
// the real API and to wait for an email's status.
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { createApiKey } from '../../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified, recordsOf } from '../../apps/services/management/domains.ts';
import { createProject } from '../../apps/services/management/projects.ts';
import { createWorkspace, setWorkspaceActivation } from '../../apps/services/management/workspaces.ts';
import type { TestApp } from './app.ts';
import type { TestDnsServer, ZoneRecord } from './dns-server.ts';
import { waitUntil } from './eventually.ts';

export interface DeliveryTenant {
  key: string;
  projectId: string;
  workspaceId: string;
  domain: string;
  /** The zone records Relay asked the customer to publish (DKIM TXT among them). */
  zone: ZoneRecord[];
}

let tenants = 0;

/**
 * A production project of an activated workspace (any recipient domain) with a verified,
 * connected domain; a development project (sending only to that domain) when asked.
 */
export async function deliveryTenant(t: TestApp, domain = `send${++tenants}.example.test`, environment: 'production' | 'development' = 'production'): Promise<DeliveryTenant> {
  const documents = t.ctx.documents;
  const now = t.ctx.now();
  const owner = { _id: `usr_delivery_${tenants}`, email: `owner${tenants}@delivery.test`, passwordHash: 'x', createdAt: now.toISOString() };
  const { workspace } = await createWorkspace(documents, owner, `Delivery ${tenants}`, now);
  await setWorkspaceActivation(documents, workspace._id, true, now);
  const project = await createProject(documents, { workspaceId: workspace._id, name: 'mail', environment }, now);
  const created = await createDomain(documents, { workspaceId: workspace._id, name: domain }, now, t.ctx.services.secrets);
  await markDomainVerified(documents, created._id, 'delivery test fixture', now);
  await connectDomain(documents, created._id, project._id);
  const { secret } = await createApiKey(documents, { project, name: 'sender', permissions: ['email:send', 'email:read'] }, now);
  const zone: ZoneRecord[] = recordsOf(created, t.config)
    .filter((r) => r.type === 'TXT')
    .map((r) => ({ name: r.name, type: 'TXT' as const, data: r.value }));
  return { key: secret, projectId: project._id, workspaceId: workspace._id, domain, zone };
}

export async function send(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const response = await t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${key}` }, payload: body });
  if (response.statusCode !== 202) throw new Error(`POST /v1/emails: ${response.statusCode} ${response.body}`);
  return response.json().id as string;
}

/** POST /v1/emails, waiting out the key's request rate (100 a second) when a burst reaches it. */
export async function sendPaced(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  for (;;) {
    const response = await t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${key}` }, payload: body });
    if (response.statusCode === 202) return response.json().id as string;
    if (response.statusCode !== 429) throw new Error(`POST /v1/emails: ${response.statusCode} ${response.body}`);
    await new Promise((resolve) => setTimeout(resolve, 1000 * Number(response.headers['retry-after'] ?? 1)));
  }
}

export async function detail(t: TestApp, key: string, id: string) {
  const response = await t.app.inject({ method: 'GET', url: `/v1/emails/${id}`, headers: { authorization: `Bearer ${key}` } });
  if (response.statusCode !== 200) throw new Error(`GET /v1/emails/${id}: ${response.statusCode} ${response.body}`);
  return response.json();
}

/** Waits until the email's detail satisfies `done`; returns that detail. */
export async function waitForDetail(t: TestApp, key: string, id: string, done: (d: any) => boolean, what: string, timeoutMs = 20_000) {
  let last: any;
  try {
    await waitUntil(async () => done((last = await detail(t, key, id))), `${id} ${what}`, timeoutMs);
  } catch (error) {
    const stream = (await t.stores.events.readStream(`email-${id}`)).map((e) => ({ type: e.type, data: e.type === 'EmailAccepted' ? '…' : e.data }));
    throw new Error(`${(error as Error).message}; last status ${last?.status}, timeline ${JSON.stringify(last?.events?.map((e: any) => e.type))}, stream ${JSON.stringify(stream)}`);
  }
  return last;
}

/** mailauth's DKIM verdicts for a message, its key looked up through the test DNS server. */
export async function dkimResults(dns: TestDnsServer, raw: Buffer) {
  const resolver = new Resolver({ timeout: 2000, tries: 2 });
  resolver.setServers([dns.address]);
  const result = await dkimVerify(raw, {
    strict: true,
    resolver: (name: string, rrtype: string) => {
      if (rrtype !== 'TXT') throw new Error(`unexpected ${rrtype} lookup for ${name}`);
      return resolver.resolveTxt(name);
    },
  });
  return result.results;
}
