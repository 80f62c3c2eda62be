// Dashboard sessions. The cookie carries 32 random bytes; the store keeps only their sha256,
// so a copy of the database cannot be replayed as live sessions. Sessions slide: each use
// pushes the idle expiry (written back at most hourly), up to an absolute cap.
import { sessionIsLive, sessionNeedsRefresh, slidingExpiry, type Session, type User } from '../../../domain/management.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { newSecret, sha256Hex } from './ids.ts';
import { usersOf } from './users.ts';

export const sessionsOf = (documents: DocumentStore) => documents.collection<Session>(COLLECTIONS.sessions);

export async function createSession(documents: DocumentStore, userId: string, now: Date): Promise<{ token: string; session: Session }> {
  const sessions = sessionsOf(documents);
  // Housekeeping on login keeps a user's ended sessions from piling up.
  const ended = await sessions.find({ where: { userId, expiresAt: { lte: now.toISOString() } }, limit: 100 });
  await Promise.all(ended.map((s) => sessions.delete(s._id, s._v)));
  const token = newSecret();
  const createdAt = now.toISOString();
  const session = await sessions.insert({ _id: sha256Hex(token), userId, createdAt, expiresAt: slidingExpiry(createdAt, now) });
  return { token, session };
}

/** The live session and its user for a cookie token, or null. */
export async function resolveSession(documents: DocumentStore, token: string, now: Date): Promise<{ session: Session; user: User } | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return null;
  const sessions = sessionsOf(documents);
  let session = await sessions.get(sha256Hex(token));
  if (!session) return null;
  if (!sessionIsLive(session, now)) {
    await sessions.delete(session._id, session._v);
    return null;
  }
  const user = await usersOf(documents).get(session.userId);
  if (!user) return null;
  if (sessionNeedsRefresh(session, now)) {
    // Losing this race to a concurrent request is fine: it wrote the same kind of refresh.
    const { _v, ...body } = session;
    session = (await sessions.replace({ ...body, expiresAt: slidingExpiry(session.createdAt, now) }, _v)) ?? session;
  }
  return { session, user };
}

export async function endSession(documents: DocumentStore, sessionId: string): Promise<void> {
  await sessionsOf(documents).delete(sessionId);
}
