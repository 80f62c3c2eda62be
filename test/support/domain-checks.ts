// A sending domain's checks against DNS a test publishes, as a customer would: a DNS server the
// suite starts, a fresh Relay for each test (RELAY_DNS_SERVERS pointed at it), a workspace owner,
// the domain created through the API, its instructed records published with the test's own
// variants, and what a receiver (mailauth) resolves from the same server.
import { Resolver } from 'node:dns/promises';
import { suite, type Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DomainView } from '../../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './app.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './dns-server.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './management.ts';

export const MAIL_HOST = 'mx.relay.test';

export interface DomainCheckCtx {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  workspaceId: string;
}

/** A suite whose tests each get a Relay answering DNS from the suite's server, and a workspace owner. */
export function domainCheckSuite(name: string): Test<DomainCheckCtx> {
  const test = suite<DomainCheckCtx>(name);
  test.before(async (ctx) => {
    ctx.dns = await startDnsServer([]);
  });
  test.after(async (ctx) => {
    await ctx.dns.close();
  });
  test.before.each(async (ctx) => {
    ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MAIL_HOST: MAIL_HOST });
    ctx.owner = await newCaller(ctx.t, 'owner@acme.test');
    ({ workspaceId: ctx.workspaceId } = await workspaceWithProject(ctx.t, ctx.owner));
  });
  test.after.each(async (ctx) => {
    await ctx.t.close();
  });
  return test;
}

/** The domain `name` created in the owner's workspace (201). */
export async function createDomain(ctx: DomainCheckCtx, name: string): Promise<DomainView> {
  const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name } });
  assert.is(created.statusCode, 201, created.body);
  return created.json() as DomainView;
}

/** POST /v1/domains/:id/verify (200): the domain with its checks. */
export async function verifyDomain(ctx: DomainCheckCtx, domain: DomainView): Promise<DomainView> {
  const verified = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
  assert.is(verified.statusCode, 200, verified.body);
  return verified.json() as DomainView;
}

/** The check of that purpose among a verified domain's. */
export const checkOf = (domain: DomainView, purpose: string) => domain.checks!.find((c) => c.purpose === purpose)!;

/**
 * Publishes the domain's records as instructed (only the required ones with `requiredOnly`), a TXT
 * record's value replaced where `txtFor` gives one for its purpose, with `more` records beside them.
 */
export function publishDomain(ctx: DomainCheckCtx, domain: DomainView, options: { txtFor?: Record<string, string>; requiredOnly?: boolean; more?: ZoneRecord[] } = {}): void {
  const records = domain.records.filter((r) => !options.requiredOnly || r.required).map((r): ZoneRecord => {
    if (r.type === 'MX') return { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } };
    return { name: r.name, type: 'TXT', data: options.txtFor?.[r.purpose] ?? r.txtStrings ?? r.value };
  });
  ctx.dns.setZone([...records, ...(options.more ?? [])]);
}

/** A resolver as mailauth takes it, asking the suite's DNS server. */
export function receiverResolver(ctx: DomainCheckCtx): (name: string, type: string) => Promise<string[][]> {
  const resolver = new Resolver({ timeout: 1000, tries: 2 });
  resolver.setServers([ctx.dns.address]);
  return (name, type) => resolver.resolve(name, type as 'TXT');
}
