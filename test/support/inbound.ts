// The feedback SMTP server on a free port of 127.0.0.1, recording into a test app's stores
// (startTestInbound); and a Relay (API, embedded stores) with one, for tests of the server's own
// limits: emails are admitted through the API and their return paths made as the sender makes
// them (domain/delivery/verp.ts, with Relay's own MAC key), so no delivery needs to run first.
import { startInbound, type InboundOptions, type InboundServer } from '../../apps/inbound/inbound-server.ts';
import { emailsOf } from '../../apps/services/email-stream.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../../domain/delivery/verp.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './delivery.ts';

export interface InboundFixture {
  t: TestApp;
  tenant: DeliveryTenant;
  inbound: InboundServer;
  /** What the server reported through onError (a client's reset is not one: onSessionError). */
  errors: Error[];
  /** Admits an email to `to` and returns its id and each recipient's return path, in order. */
  email(to: string[]): Promise<{ id: string; returnPaths: string[] }>;
  close(): Promise<void>;
}

export async function startInboundFixture(options: Partial<Pick<InboundOptions, 'limits' | 'parserWorkerUrl' | 'maxConnectionsPerClient' | 'storeProbe' | 'onRefused' | 'onRefusing' | 'refusalsToldEveryMs'>> & {
  /** The event store the server uses (tests wrap the real one to watch or hold it). */
  events?: (real: EventStore) => EventStore;
  /** The document store the server uses (tests wrap the real one to watch it). */
  documents?: (real: DocumentStore) => DocumentStore;
} = {}): Promise<InboundFixture> {
  const t = await startTestApp();
  const tenant = await deliveryTenant(t);
  const errors: Error[] = [];
  const events = options.events ? options.events(t.stores.events) : t.stores.events;
  const inbound = await startInbound({
    host: '127.0.0.1', port: 0, hostname: 'feedback.relay.test', tlsCertFile: null, tlsKeyFile: null,
    events, emails: options.events ? emailsOf(events, t.ctx.services.policies) : t.ctx.services.emails,
    documents: options.documents ? options.documents(t.stores.documents) : t.stores.documents, secrets: t.ctx.services.secrets, now: () => new Date(),
    onError: (error) => errors.push(error),
    limits: options.limits, parserWorkerUrl: options.parserWorkerUrl, maxConnectionsPerClient: options.maxConnectionsPerClient, storeProbe: options.storeProbe,
    onRefused: options.onRefused, onRefusing: options.onRefusing, refusalsToldEveryMs: options.refusalsToldEveryMs,
  });
  return {
    t, tenant, inbound, errors,
    async email(to) {
      const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to, subject: 'Feedback', text: 'hi' });
      const mac = (data: string) => t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, data);
      return { id, returnPaths: to.map((_, recipientIndex) => verpAddress({ emailId: id, recipientIndex, mailFromDomain: `bounce.${tenant.domain}` }, mac)) };
    },
    async close() {
      await inbound.stop();
      await t.close();
    },
  };
}

/** The feedback server for a test app that runs the parts the test needs, as `relay inbound` beside them. */
export function startTestInbound(t: TestApp, now: () => Date = () => new Date()): Promise<InboundServer> {
  return startInbound({
    host: '127.0.0.1', port: 0, hostname: 'feedback.relay.test', tlsCertFile: null, tlsKeyFile: null,
    events: t.stores.events, emails: t.ctx.services.emails, documents: t.stores.documents, secrets: t.ctx.services.secrets, now,
    onError: () => {},
  });
}
