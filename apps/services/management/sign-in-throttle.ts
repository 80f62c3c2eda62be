// Sign-in throttling (rules in domain/sign-in-throttle.ts), shared by every API process through
// the document store.
//
// A sign-in is counted before anything else (before the user is looked up or a password is
// hashed): a key that must wait is answered 429 rate_limit_exceeded without that work, the same
// for accounts that exist and those that do not. Only wrong credentials stay counted; a locked
// key's refused attempts do not push its wait further.
//
// Each counted attempt is one document whose _id is "<key>|<generation>|<n>", n counting the
// key's failures: an attempt reads the key's latest document (an _id range), and unless the key
// must wait, inserts the next number. Inserts against a unique _id are atomic on every adapter
// (compare-and-set is not, across processes, on FerretDB: infra/engines/README.md), so however
// many processes count at once each number is taken once, and parallel attempts line up exactly
// as sequential ones would. A key forgotten after its quiet period starts the next generation at
// n = 1. An attempt that turns out not to be a failure deletes its document; a successful sign-in
// deletes its account's documents.
//
// Keys are stored as sha256 hashes ("account:<hash of the email>", "address:<hash of the IPv4 address or IPv6 /64>"):
// the collection says how often something failed, not who. Documents carry `expiresAt` (their
// time plus the forget period) for pruneSignInThrottles.
import { RelayError } from '../../../domain/errors.ts';
import { normalizeAddress } from '../../../domain/management.ts';
import {
  afterFailure, SIGN_IN_THROTTLES, signInThrottledMessage, waitBeforeAttempt, waitSeconds, liveState,
  type ThrottlePolicy,
} from '../../../domain/sign-in-throttle.ts';
import { DuplicateKeyError, type DocumentStore } from '../../../infra/ports/document-store.ts';
import { clientNetworkOf } from '../../../infra/http/address-ranges.ts';
import { COLLECTIONS } from '../collections.ts';
import { sha256Hex } from './ids.ts';

interface FailureDoc {
  _id: string;
  generation: number;
  /** This failure's number in its generation. */
  n: number;
  atMs: number;
  /** ISO time after which the document means nothing. */
  expiresAt: string;
}

export interface SignInSubject {
  email: string;
  /** The client's address as the HTTP server sees it (the proxy's, unless the operator trusts its headers). */
  address: string;
}

/** How long a refused sign-in is held before its answer (see beginSignIn). */
export const REFUSAL_HOLD_MS = 1000;

export const holdRefusal = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Numbers found taken while counting one attempt (each means another attempt was counted meanwhile). */
const MAX_INSERT_TRIES = 64;

const failuresOf = (documents: DocumentStore) => documents.collection<FailureDoc>(COLLECTIONS.signInThrottles);

const keyOf = (policy: ThrottlePolicy, subject: SignInSubject): string =>
  `${policy.kind}:${sha256Hex(policy.kind === 'account' ? normalizeAddress(subject.email) : clientNetworkOf(subject.address))}`;

const pad = (n: number) => String(n).padStart(9, '0');
/** Every document of a key: "<key>|" up to, not including, "<key>}" ("}" follows "|"). */
const documentsOfKey = (key: string) => ({ _id: { gte: `${key}|`, lt: `${key}}` } });

export async function ensureSignInThrottleIndexes(documents: DocumentStore): Promise<void> {
  await failuresOf(documents).ensureIndexes([{ name: 'expiresAt', fields: [['expiresAt', 'asc']] }]);
}

export interface SignInAttempt {
  /** The password was right: the account's count is cleared, the address's attempt taken back. */
  succeeded(): Promise<void>;
  /** Something else than a wrong password ended the attempt (busy, an outage): it is taken back. */
  abandoned(): Promise<void>;
}

/**
 * Counts a sign-in attempt as a failure of its account and of its address before it is checked,
 * so that parallel attempts cannot all start before any of them has failed. Throws 429
 * rate_limit_exceeded (Retry-After) when either key must wait; the refusal is held for up to
 * REFUSAL_HOLD_MS first: it costs a timer, and a client that retries at once (a flood of parallel
 * attempts) then makes one attempt per second per connection instead of thousands, each of which
 * would take the event loop from the sends.
 */
export async function beginSignIn(documents: DocumentStore, subject: SignInSubject, now: () => Date): Promise<SignInAttempt> {
  const nowMs = now().getTime();
  const counted: Array<{ policy: ThrottlePolicy; key: string; id: string }> = [];
  const takeBack = () => Promise.all(counted.map((c) => failuresOf(documents).delete(c.id)));
  for (const policy of SIGN_IN_THROTTLES) {
    const key = keyOf(policy, subject);
    const outcome = await countAttempt(documents, policy, key, nowMs);
    if ('waitMs' in outcome) {
      await takeBack();
      await holdRefusal(Math.min(outcome.waitMs, REFUSAL_HOLD_MS));
      // Retry-After counts from the answer, after the hold.
      const seconds = waitSeconds(nowMs + outcome.waitMs - now().getTime());
      throw new RelayError('rate_limit_exceeded', signInThrottledMessage(seconds), { retryAfterSeconds: seconds });
    }
    counted.push({ policy, key, id: outcome.id });
  }
  return {
    succeeded: async () => {
      await Promise.all(counted.map((c) => (c.policy.kind === 'account'
        ? failuresOf(documents).deleteWhere(documentsOfKey(c.key))
        : failuresOf(documents).delete(c.id))));
    },
    abandoned: async () => {
      await takeBack();
    },
  };
}

/** Counts one attempt of the key (the _id of its document), unless the key must wait: then nothing is written. */
async function countAttempt(documents: DocumentStore, policy: ThrottlePolicy, key: string, nowMs: number): Promise<{ id: string } | { waitMs: number }> {
  const failures = failuresOf(documents);
  for (let tries = 0; tries < MAX_INSERT_TRIES; tries++) {
    const [latest] = await failures.find({ where: documentsOfKey(key), orderBy: [['_id', 'desc']], limit: 1 });
    const state = latest ? { failures: latest.n, lastFailureAtMs: latest.atMs } : null;
    const waitMs = waitBeforeAttempt(policy, state, nowMs);
    if (waitMs > 0) return { waitMs };
    // A forgotten key starts a generation of its own: its old numbers may still be stored.
    const live = liveState(policy, state, nowMs);
    const generation = live ? latest.generation : (latest?.generation ?? 0) + 1;
    const n = afterFailure(policy, live, nowMs).failures;
    const id = `${key}|${pad(generation)}|${pad(n)}`;
    try {
      await failures.insert({ _id: id, generation, n, atMs: nowMs, expiresAt: new Date(nowMs + policy.forgetAfterMs).toISOString() });
      return { id };
    } catch (error) {
      if (!(error instanceof DuplicateKeyError)) throw error;
    }
  }
  // So many attempts on this key at once that this one never got its turn: theirs are counted.
  return { waitMs: REFUSAL_HOLD_MS };
}

/** Deletes keys whose failures are forgotten; returns how many. */
export function pruneSignInThrottles(documents: DocumentStore, now: Date): Promise<number> {
  return failuresOf(documents).deleteWhere({ expiresAt: { lte: now.toISOString() } });
}
