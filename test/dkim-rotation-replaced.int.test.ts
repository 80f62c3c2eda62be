// A verify that checked one pending DKIM key must not complete a rotation that was
// cancelled and started again meanwhile under the same selector with another key: the check said
// nothing about the new key's record, and completing would sign mail with a key DNS does not hold.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { verifyDomain } from '../apps/services/management/domains.ts';
import { cancelDomainDkimRotation, startDomainDkimRotation } from '../apps/services/management/dkim-rotations.ts';
import type { DnsAnswer, DnsRecord } from '../domain/sending-domain.ts';
import type { DnsLookup } from '../infra/ports/dns.ts';
import { startTestApp } from './support/app.ts';
import { call, newCaller, workspaceWithProject } from './support/management.ts';

const test = suite('a DKIM rotation replaced during a verify');

test('a verify whose check was of a cancelled key does not complete the rotation restarted under the same selector', async () => {
  const t = await startTestApp({ RELAY_MAIL_HOST: 'mx.relay.test' });
  try {
    const owner = await newCaller(t, 'owner@example.com');
    const { workspaceId } = await workspaceWithProject(t, owner);
    const created = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: 'race.example' } });
    assert.is(created.statusCode, 201, created.body);
    const domainId = created.json().id as string;
    const docs = t.ctx.documents;
    const secrets = t.ctx.services.secrets;

    // The rotation the customer published a record for.
    const first = await startDomainDkimRotation(docs, { domainId, selector: 'rot1' }, t.ctx.now(), secrets);
    const publishedKey = first.dkimRotation!.publicKeyBase64;

    // DNS publishes the first pending key's record; while the verify asks, the rotation is
    // cancelled and started again under the same selector (a new key).
    let raced = false;
    let secondKey = '';
    const lookup: DnsLookup = {
      async lookupRecords(records: ReadonlyArray<Pick<DnsRecord, 'name' | 'type'>>): Promise<DnsAnswer[]> {
        if (records.some((r) => r.name.startsWith('rot1.')) && !raced) {
          raced = true;
          await cancelDomainDkimRotation(docs, domainId);
          const second = await startDomainDkimRotation(docs, { domainId, selector: 'rot1' }, t.ctx.now(), secrets);
          secondKey = second.dkimRotation!.publicKeyBase64;
        }
        return records.map((r): DnsAnswer => (r.name.startsWith('rot1.')
          ? { name: r.name, type: 'TXT', kind: 'answer', txt: [[`v=DKIM1; k=rsa; p=${publishedKey}`]] }
          : { name: r.name, type: r.type, kind: 'nxdomain' }));
      },
    };
    const after = await verifyDomain(docs, t.config, lookup, domainId, t.ctx.now());
    assert.ok(raced, 'the lookup ran the race');
    assert.is.not(secondKey, publishedKey);
    // DNS holds the first key only: the second must not be the signing key.
    assert.is.not(after.dkimPublicKeyBase64, secondKey, 'the rotation completed with a key whose record DNS does not hold');
  } finally {
    await t.close();
  }
});

test.run();
