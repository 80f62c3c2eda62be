// Users: created by an operator (relay user create / relay setup), they log in with email
// and password. There is no self-service sign-up: a self-hosted service decides who gets in.
import { RelayError, validationError } from '../../../domain/errors.ts';
import { isPlainAddress, normalizeAddress, passwordProblem, type User } from '../../../domain/management.ts';
import type { DocumentStore, Stored } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { insertUnique } from './documents.ts';
import { CONTROL_CHARACTERS } from './names.ts';
import { newId } from './ids.ts';
import { hashPassword, needsRehash, verifyAgainstDecoy, verifyPassword } from './passwords.ts';

export interface UserView { id: string; email: string; createdAt: string }

export const userView = (user: User): UserView => ({ id: user._id, email: user.email, createdAt: user.createdAt });

export const usersOf = (documents: DocumentStore) => documents.collection<User>(COLLECTIONS.users);

export function normalizeUserEmail(input: string): string {
  const email = normalizeAddress(input);
  if (!isPlainAddress(email) || CONTROL_CHARACTERS.test(email)) throw validationError(`email ${JSON.stringify(input.trim())} is not an email address`);
  return email;
}

export async function createUser(documents: DocumentStore, input: { email: string; password: string }, now: Date): Promise<User> {
  const email = normalizeUserEmail(input.email);
  const problem = passwordProblem(input.password);
  if (problem) throw validationError(problem);
  const user: User = { _id: newId('usr'), email, passwordHash: await hashPassword(input.password), createdAt: now.toISOString() };
  return insertUnique(usersOf(documents), user, `a user with email ${email} already exists`);
}

export async function findUserByEmail(documents: DocumentStore, email: string): Promise<Stored<User> | null> {
  const [user] = await usersOf(documents).find({ where: { email: normalizeAddress(email) }, limit: 1 });
  return user ?? null;
}

/**
 * The user whose email and password these are. Both ways of failing give the same error
 * after the same work, so a caller cannot learn which emails have accounts.
 */
export async function authenticateUser(documents: DocumentStore, email: string, password: string): Promise<User> {
  const refused = () => new RelayError('invalid_credentials', 'email or password is incorrect');
  const user = await findUserByEmail(documents, email);
  if (!user) {
    await verifyAgainstDecoy(password);
    throw refused();
  }
  if (!(await verifyPassword(password, user.passwordHash))) throw refused();
  if (needsRehash(user.passwordHash)) {
    // Best effort: a concurrent write wins and the next login tries again.
    const { _v, ...body } = user;
    await usersOf(documents).replace({ ...body, passwordHash: await hashPassword(password) }, _v).catch(() => null);
  }
  return user;
}
