// The real API with the email projector in-process, in either mode: embedded (node:sqlite
// stores) or distributed (the document store from RELAY_MONGODB_URL, FerretDB from
// infra/engines or MongoDB, in a database of its own dropped on close). For tests that send
// through POST /v1/emails and read the list back, and must get the same answers in both modes.
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import type { ParkedEvent } from '../../apps/services/parked-events.ts';
import { startTestApp, type TestApp } from './app.ts';
import { DASHBOARD_ORIGIN, distributedSkipReason, populateTemplateWorld, type Mode, type TemplateWorld } from './templates.ts';

export { distributedSkipReason, type Mode };

export interface ListApp {
  t: TestApp;
  w: TemplateWorld;
  /** Every failure the projector reported (it retries them, then parks the event). */
  projectorErrors: string[];
  close(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?#]*)(?:\/[^?#]*)?(.*)$/i.exec(url);
  if (!match) throw new Error(`RELAY_MONGODB_URL is not a mongodb URL: ${url}`);
  return `${match[1]}/${database}${match[2]}`;
}

export async function startListApp(mode: Mode): Promise<ListApp> {
  const projectorErrors: string[] = [];
  const baseUrl = process.env.RELAY_MONGODB_URL?.trim();
  const database = `relay_parity_${randomBytes(6).toString('hex')}`;
  if (mode === 'distributed' && !baseUrl) throw new Error('distributed mode needs RELAY_MONGODB_URL');
  const env: Record<string, string> = { RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN };
  if (mode === 'distributed') env.RELAY_MONGODB_URL = withDatabase(baseUrl!, database);
  const t = await startTestApp(env, { processors: ['projector'], onProcessorError: (error) => projectorErrors.push(error.message) });
  const close = async () => {
    await t.close();
    if (mode !== 'distributed') return;
    const admin = await MongoClient.connect(baseUrl!);
    try {
      await admin.db(database).dropDatabase();
    } finally {
      await admin.close();
    }
  };
  try {
    return { t, w: await populateTemplateWorld(t), projectorErrors, close };
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
}

/** The ids GET /v1/emails lists (first page of 100) for the world's key, with `query`. */
export async function listedIds({ t, w }: ListApp, query = ''): Promise<string[]> {
  const r = await t.app.inject({ method: 'GET', url: `/v1/emails?limit=100${query}`, headers: { authorization: `Bearer ${w.apiKey}` } });
  if (r.statusCode !== 200) throw new Error(`GET /v1/emails${query}: ${r.statusCode} ${r.body}`);
  return (r.json().emails as Array<{ id: string }>).map((e) => e.id);
}

/** The projector's parked event of the email, if it gave up on one (what `relay parked list` shows). */
export async function parkedOf({ t }: ListApp, emailId: string): Promise<ParkedEvent | null> {
  const [parked] = await t.ctx.documents.collection<ParkedEvent>(COLLECTIONS.parkedEvents)
    .find({ where: { processor: 'projector', streamId: `email-${emailId}` }, limit: 1 });
  return parked ?? null;
}
