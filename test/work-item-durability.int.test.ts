// The delivery schedule follows the email's stream but lives in another store: it may change
// only once the events it follows are durable. A recovery's schedule entry deleted while its
// DeliveryFailed still waited for the group commit was lost with that commit when the sender
// was killed, and the email stayed `processing` for good (found by the chaos run).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { syncWorkItem, workItems } from '../apps/services/delivery/work-items.ts';
import { initialEmailState } from '../domain/email/state.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { commitHoldSwitch } from './support/commit-hold.ts';

const test = suite('delivery schedule after the stream');

test('the schedule changes only after the events it follows are durable', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-work-items-'));
  const holds = commitHoldSwitch();
  const events = new SqliteEventStore(join(dir, 'events.db'), { commitHold: holds.hold });
  const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
  try {
    const emailId = 'em_durability';
    await workItems(documents).insert({ _id: emailId, step: 'recover', attempt: 1, dueAt: new Date(0).toISOString(), streamRevision: 0 } as never);
    const order: string[] = [];
    let release!: () => void;
    let held!: () => void;
    const holdEntered = new Promise<void>((resolve) => (held = resolve));
    holds.set(async (batch) => {
      if (batch.stage !== 'commit') return;
      held();
      await new Promise<void>((resolve) => (release = resolve));
      holds.set(null);
      order.push('events durable');
    });
    const scope = deferDurability(async () => {
      await events.append(`email-${emailId}`, [{ id: randomUUID(), type: 'Probe', data: {}, metadata: {} } as never], { expectedRevision: 'any' } as never);
      // A state with nothing due: the entry is deleted.
      await syncWorkItem(documents, events, emailId, { correlationId: 'c', causationId: null } as never, {} as never, { state: initialEmailState, revision: 1 } as never);
    });
    await holdEntered;
    // What the schedule holds while the events wait: read from the store itself, so a delete
    // that ran ahead of the commit is seen as soon as it is made.
    for (let turn = 0; turn < 200 && !order.length; turn++) {
      if (!(await workItems(documents).get(emailId))) order.push('entry deleted while the events waited');
      await new Promise((resolve) => setImmediate(resolve));
    }
    release();
    await scope;
    assert.equal(order, ['events durable'], 'the entry stayed while the events waited for their commit');
    assert.is(await workItems(documents).get(emailId), null, 'then it went');
  } finally {
    holds.set(null);
    await events.close();
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
