// The TLS report sink of a sender process: counts each session outcome the MX transport tells
// (per UTC day, recipient domain, policy, result, MX host and addresses) in memory and adds
// the counts to the `tls_session_counts` collection every few seconds, with compare-and-set,
// so any number of sender instances add to the same lines. A crash loses at most the counts
// of the last interval: TLS reports are statistics, and RFC 8460 asks for no more.
import { createHash } from 'node:crypto';
import type { TlsSessionCount } from '../../../domain/delivery/tls-report.ts';
import { DuplicateKeyError, type DocumentStore } from '../../../infra/ports/document-store.ts';
import type { TlsSessionResult, TlsSessionSink } from '../../../infra/mail/tls-sessions.ts';
import { COLLECTIONS } from '../collections.ts';

export type TlsSessionCountDoc = TlsSessionCount & { _id: string };

export const tlsSessionCounts = (documents: DocumentStore) => documents.collection<TlsSessionCountDoc>(COLLECTIONS.tlsSessionCounts);

export async function ensureTlsSessionCountIndexes(documents: DocumentStore): Promise<void> {
  await tlsSessionCounts(documents).ensureIndexes([{ name: 'day_domain', fields: [['day', 'asc'], ['domain', 'asc']] }]);
}

/** How often a process adds its counts to the store, by default (the daily reports wait for the last of them). */
export const FLUSH_EVERY_MS = 10_000;

/** Different lines a process keeps before it must flush (a flood of distinct MX addresses cannot grow it). */
const MAX_PENDING_LINES = 10_000;

function lineOf(session: TlsSessionResult): TlsSessionCountDoc {
  const line: TlsSessionCount = {
    day: session.at.toISOString().slice(0, 10),
    domain: session.recipientDomain,
    policy: session.policy,
    result: session.result,
    mxHost: session.mxHost ?? null,
    receivingIp: session.receivingIp ?? null,
    sendingIp: session.sendingIp ?? null,
    detail: session.detail ?? null,
    count: 1,
  };
  const identity = JSON.stringify([line.day, line.domain, line.policy, line.result, line.mxHost, line.receivingIp, line.sendingIp]);
  return { _id: createHash('sha256').update(identity).digest('base64url').slice(0, 32), ...line };
}

export class TlsSessionCounter implements TlsSessionSink {
  readonly #documents: DocumentStore;
  readonly #pending = new Map<string, TlsSessionCountDoc>();
  readonly #timer: NodeJS.Timeout;
  readonly #onError: (error: Error) => void;
  #flushing: Promise<void> = Promise.resolve();

  constructor(documents: DocumentStore, options: { flushEveryMs?: number; onError?: (error: Error) => void } = {}) {
    this.#documents = documents;
    this.#onError = options.onError ?? (() => {});
    this.#timer = setInterval(() => void this.flush(), options.flushEveryMs ?? FLUSH_EVERY_MS);
    this.#timer.unref();
  }

  record(session: TlsSessionResult): void {
    const line = lineOf(session);
    const known = this.#pending.get(line._id);
    if (known) known.count++;
    else {
      this.#pending.set(line._id, line);
      if (this.#pending.size >= MAX_PENDING_LINES) void this.flush();
    }
  }

  /** Adds what was counted since the last flush to the store. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      const lines = [...this.#pending.values()];
      this.#pending.clear();
      for (const line of lines) {
        try {
          await addCount(this.#documents, line);
        } catch (error) {
          this.#onError(new Error(`TLS session counts: ${(error as Error).message}`, { cause: error }));
        }
      }
    });
    return this.#flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }
}

async function addCount(documents: DocumentStore, line: TlsSessionCountDoc): Promise<void> {
  const counts = tlsSessionCounts(documents);
  for (;;) {
    const current = await counts.get(line._id);
    if (!current) {
      try {
        await counts.insert(line);
        return;
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
        continue;
      }
    }
    const { _v, ...rest } = current;
    if (await counts.replace({ ...rest, count: current.count + line.count }, _v)) return;
  }
}
