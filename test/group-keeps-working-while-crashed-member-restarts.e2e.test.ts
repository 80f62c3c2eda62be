// A processor instance killed (SIGKILL, an OOM kill) and started again at once by its supervisor
// (systemd Restart=always, a Kubernetes pod, compose's restart policy) stops only its own
// partitions, not its whole consumer group. The member the dead instance was stays in the group
// until its session runs out (RELAY_KAFKA_SESSION_TIMEOUT_MS); a join meanwhile would start a
// rebalance in which, under kafkajs's eager protocol, the surviving instance gives up all of its
// partitions, and the broker would hold that rebalance until the dead member's session ends. So
// the restarted instance, which knows itself by its instance name (RELAY_INSTANCE_ID) in the
// members' client ids, waits for that member to leave before it joins (infra/kafka/log.ts,
// waitForEarlierSelf): the survivor goes on with its own partitions meanwhile, and only the dead
// instance's partitions wait for the session timeout, as they would without the restart.
//
// How the test sees it, with positive markers only: two projector processes with instance names
// of their own share the group. One is SIGKILLed and started again at once under the same name.
// The restarted instance says it waits for its earlier self; the broker then shows the group
// Stable, with the dead member and the survivor, and no join pending. An email whose stream lands
// on a partition of the survivor, sent then, is projected by the survivor before the dead
// member's session ends: before the restarted instance says that member left, and before the
// survivor's next assignment (which that departure brings). At the end the restarted instance is
// ready and every email is in the read model (nothing is lost).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { EVENTS_TOPIC_PARTITIONS, groupOf } from '../apps/pipeline/topics.ts';
import { partitionForKey } from '../infra/sqlite/partitioner.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { distributedEnv } from './support/delivery-smtp-suite.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

/**
 * The projectors' session timeout: the window in which the survivor must project the email while
 * the dead member is still in the group. Twice the default, so that a loaded machine's slow
 * restart of a process leaves it wide.
 */
const SESSION_TIMEOUT_MS = 20_000;

interface Context {
  dataDir: string;
  env: Record<string, string>;
  t: TestApp;
  tenant: DeliveryTenant;
  admin: Admin;
  processes: RelayProcess[];
}

const test = skippableSuite<Context>(
  'a processor instance killed and started again at once',
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);

interface LogLine {
  time: number;
  msg: string;
  component?: string;
  streamId?: string;
  memberId?: string;
  partitions?: number[];
}

const lines = (process: RelayProcess): LogLine[] =>
  process.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as LogLine);

/** The instance's last membership line (joined / assigned), from its own info lines. */
const membershipOf = (process: RelayProcess): LogLine | undefined =>
  lines(process).filter((l) => /^projector: (joined consumer group|assigned )/.test(l.msg)).at(-1);

const ownedBy = (process: RelayProcess): number[] => membershipOf(process)?.partitions ?? [];

test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-restart-stall-'));
  ctx.processes = [];
  // The embedded event store in a shared data directory, Kafka and FerretDB: as the distributed tests run.
  ctx.env = { RELAY_DATA_DIR: ctx.dataDir, ...distributedEnv(brokers!, mongoUrl!), RELAY_DELIVERY: 'outbox' };
  // The API and the forwarder in the test process; the projectors are processes of their own.
  ctx.t = await startTestApp(ctx.env, { dataDir: ctx.dataDir, processors: [] });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.admin = new Kafka({ clientId: 'restart-stall-test', brokers: brokers!.split(','), logLevel: logLevel.NOTHING }).admin();
  await ctx.admin.connect();
});

test.after(async (ctx) => {
  for (const p of ctx.processes) await p.kill();
  await ctx.admin?.disconnect();
  await ctx.t?.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

/** A projector process under an instance name: its restart keeps the name, as a pod's or a host's. */
function startProjector(ctx: Context, instance: string): { process: RelayProcess; url: string } {
  const port = freePortSync.next();
  const process = spawnRelay(['processor', 'projector'], {
    ...ctx.env, PORT: String(port), RELAY_LOG_LEVEL: 'debug', RELAY_LOG_FORMAT: 'json',
    RELAY_INSTANCE_ID: instance, RELAY_KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
  });
  ctx.processes.push(process);
  return { process, url: `http://127.0.0.1:${port}` };
}

// Ports taken before the processes start (freePort is async; the restart must not wait for anything).
const freePortSync = {
  ports: [] as number[],
  async fill(n: number) {
    for (let i = 0; i < n; i++) this.ports.push(await freePort());
  },
  next(): number {
    const port = this.ports.shift();
    if (port === undefined) throw new Error('no port left');
    return port;
  },
};

const projected = (ctx: Context) => ctx.t.stores.documents.collection(COLLECTIONS.emails).count({ projectId: { ne: null } });

test('the surviving instance goes on with its own partitions while the restarted one waits for its earlier self to leave', async (ctx) => {
  await freePortSync.fill(3);
  const group = groupOf(ctx.t.config.logNamespace, 'projector');
  const sendOne = (n: number) => send(ctx.t, ctx.tenant.key, { from: `app@${ctx.tenant.domain}`, to: `u${n}@example.org`, subject: `n${n}`, text: 'hi' });
  const ids: string[] = [];

  const a = startProjector(ctx, 'projector-a');
  await waitForReady(a.url, a.process, 60_000);
  const b = startProjector(ctx, 'projector-b');
  await waitForReady(b.url, b.process, 60_000);
  // Both own partitions (the rebalance of B's join is over), and both handle events.
  await waitUntil(() => ownedBy(a.process).length > 0 && ownedBy(b.process).length > 0 && ownedBy(a.process).length + ownedBy(b.process).length === EVENTS_TOPIC_PARTITIONS,
    'the two instances share the partitions', 30_000);
  for (let i = 0; i < 10; i++) ids.push(await sendOne(ids.length));
  await waitUntil(async () => (await projected(ctx)) === ids.length, 'the first emails are projected', 60_000);
  const survivorPartitions = new Set(ownedBy(b.process));
  const deadMember = membershipOf(a.process)!.memberId!;
  const survivorMember = membershipOf(b.process)!.memberId!;
  assert.ok(deadMember && survivorMember, 'each instance logged its member id');
  const assignedBefore = lines(b.process).filter((l) => l.msg.startsWith('projector: assigned ')).length;

  // A dies; its supervisor starts it again at once, under the same name.
  await a.process.kill();
  const restarted = startProjector(ctx, 'projector-a');

  // The restarted instance finds its earlier self in the group and waits for it to leave.
  const waiting = (l: LogLine) => l.component === 'kafka-log' && /a member named projector-a, this instance's name, is still in the group \(this instance before a crash/.test(l.msg);
  const describeGroup = async () => (await ctx.admin.describeGroups([group])).groups[0];
  // (Or, were it to join at once, the broker has the group rebalancing: the assertions below say so.)
  await waitUntil(async () => lines(restarted.process).some(waiting) || (await describeGroup()).state !== 'Stable',
    'the restarted instance says it waits for its earlier self (or the group rebalances)', 60_000);
  // Meanwhile the group is Stable with the dead member and the survivor: no join, no rebalance.
  const described = await describeGroup();
  assert.is(described.state, 'Stable', 'no rebalance is pending while the restarted instance waits');
  assert.equal(described.members.map((m) => m.memberId).sort(), [deadMember, survivorMember].sort(), 'the members are the dead instance and the survivor');
  assert.ok(lines(restarted.process).some(waiting), 'the restarted instance said it waits for its earlier self');

  // An email whose events land on one of the survivor's partitions, sent while the dead member is in the group.
  let onSurvivor: string | null = null;
  while (onSurvivor === null) {
    const id = await sendOne(ids.length);
    ids.push(id);
    if (survivorPartitions.has(partitionForKey(`email-${id}`, EVENTS_TOPIC_PARTITIONS))) onSurvivor = id;
  }
  const stream = `email-${onSurvivor}`;

  // Positive markers: the survivor handled that email; the dead member left and the restarted
  // instance joined; the group is whole again.
  await waitUntil(() => lines(b.process).some((l) => l.msg === 'projected' && l.streamId === stream), 'the survivor projects the email on its partition', 60_000);
  const left = (l: LogLine) => l.component === 'kafka-log' && l.msg.includes('the earlier member named projector-a left after');
  await waitUntil(() => lines(restarted.process).some(left), 'the restarted instance sees its earlier self leave', SESSION_TIMEOUT_MS + 30_000);
  await waitForReady(restarted.url, restarted.process, 60_000);
  await waitUntil(async () => (await projected(ctx)) === ids.length, 'every email is projected', 60_000);

  const projectedAt = lines(b.process).find((l) => l.msg === 'projected' && l.streamId === stream)!.time;
  const leftAt = lines(restarted.process).find(left)!.time;
  assert.ok(projectedAt < leftAt, `the survivor projected the email ${leftAt - projectedAt} ms after the dead member left: it waited for the session timeout`);
  const nextAssignment = lines(b.process).filter((l) => l.msg.startsWith('projector: assigned ')).slice(assignedBefore)[0];
  assert.ok(nextAssignment !== undefined && projectedAt < nextAssignment.time,
    nextAssignment === undefined ? 'the survivor was assigned the dead member\'s partitions' : `the survivor projected the email only ${projectedAt - nextAssignment.time} ms after its next assignment`);
  assert.not.ok(lines(restarted.process).some((l) => l.component === 'kafka-log' && /joining anyway/.test(l.msg)), 'the restarted instance did not wait out its bound');
});

test.run();
