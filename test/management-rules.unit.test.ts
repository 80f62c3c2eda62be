// Pure management rules: roles, address normalization, session expiry, and how a DNS
// check moves a domain's status.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  canGrantRole, isPlainAddress, normalizeAddress, roleAtLeast, sessionIsLive, sessionNeedsRefresh, slidingExpiry, statusAfterCheck,
  SESSION_IDLE_MS, SESSION_MAX_MS, SESSION_REFRESH_MS, type CheckStatus, type Role, type Session,
} from '../domain/management.ts';

test('roles are ordered owner > admin > developer > viewer', () => {
  const order: Role[] = ['viewer', 'developer', 'admin', 'owner'];
  for (const [i, role] of order.entries()) {
    for (const [j, minimum] of order.entries()) assert.is(roleAtLeast(role, minimum), i >= j, `${role} ≥ ${minimum}`);
  }
});

test('owners grant any role, admins all but owner, others none', () => {
  const roles: Role[] = ['owner', 'admin', 'developer', 'viewer'];
  for (const granted of roles) {
    assert.ok(canGrantRole('owner', granted));
    assert.is(canGrantRole('admin', granted), granted !== 'owner');
    assert.not.ok(canGrantRole('developer', granted));
    assert.not.ok(canGrantRole('viewer', granted));
  }
});

test('addresses: trimmed and lower-cased; only plain addresses pass', () => {
  assert.is(normalizeAddress('  Bob.Smith@Example.COM \n'), 'bob.smith@example.com');
  for (const ok of ['a@b.co', 'first.last+tag@sub.example.test', "o'neil@x.io"]) assert.ok(isPlainAddress(ok), ok);
  for (const bad of ['', 'plain', '@x.io', 'a@', 'a@b', 'a b@x.io', 'A <a@x.io>', 'a@@x.io', 'a@-x.io', `${'a'.repeat(250)}@x.io`]) {
    assert.not.ok(isPlainAddress(bad), bad);
  }
});

test('sessions slide within the idle window and stop at the absolute cap', () => {
  const created = new Date('2026-01-01T00:00:00Z');
  const session: Session = { _id: 'h', userId: 'u', createdAt: created.toISOString(), expiresAt: slidingExpiry(created.toISOString(), created) };
  assert.is(Date.parse(session.expiresAt) - created.getTime(), SESSION_IDLE_MS);
  assert.ok(sessionIsLive(session, new Date(created.getTime() + SESSION_IDLE_MS - 1)));
  assert.not.ok(sessionIsLive(session, new Date(created.getTime() + SESSION_IDLE_MS)));
  // Not rewritten on every request, only once the gain is worth a write.
  assert.not.ok(sessionNeedsRefresh(session, new Date(created.getTime() + SESSION_REFRESH_MS - 1)));
  assert.ok(sessionNeedsRefresh(session, new Date(created.getTime() + SESSION_REFRESH_MS)));
  const late = new Date(created.getTime() + SESSION_MAX_MS - 1000);
  assert.is(slidingExpiry(session.createdAt, late), new Date(created.getTime() + SESSION_MAX_MS).toISOString());
});

const checks = (...statuses: Array<[CheckStatus, boolean?]>) => statuses.map(([status, required = true]) => ({ status, required }));

test('a DNS check: all required ok verifies, optional records do not matter', () => {
  assert.is(statusAfterCheck({ status: 'pending', verifiedBy: null }, checks(['ok'], ['ok'], ['ok'], ['missing', false])), 'verified');
  assert.is(statusAfterCheck({ status: 'failed', verifiedBy: null }, checks(['ok'], ['ok'], ['ok'], ['mismatch', false])), 'verified');
});

test('a DNS check: missing records are pending, wrong ones failed, a verified domain losing one failed', () => {
  assert.is(statusAfterCheck({ status: 'pending', verifiedBy: null }, checks(['missing'], ['ok'], ['ok'])), 'pending');
  assert.is(statusAfterCheck({ status: 'pending', verifiedBy: null }, checks(['mismatch'], ['missing'], ['ok'])), 'failed');
  assert.is(statusAfterCheck({ status: 'verified', verifiedBy: 'dns' }, checks(['missing'], ['ok'], ['ok'])), 'failed');
  assert.is(statusAfterCheck({ status: 'failed', verifiedBy: null }, checks(['missing'], ['missing'], ['missing'])), 'pending');
});

test('a DNS check that could not look something up changes nothing it cannot judge', () => {
  assert.is(statusAfterCheck({ status: 'verified', verifiedBy: 'dns' }, checks(['error'], ['ok'], ['ok'])), 'verified');
  assert.is(statusAfterCheck({ status: 'pending', verifiedBy: null }, checks(['error'], ['error'], ['error'])), 'pending');
  assert.is(statusAfterCheck({ status: 'failed', verifiedBy: null }, checks(['error'], ['ok'], ['ok'])), 'failed');
  // What it could judge still counts.
  assert.is(statusAfterCheck({ status: 'verified', verifiedBy: 'dns' }, checks(['error'], ['mismatch'], ['ok'])), 'failed');
});

test('an operator-verified domain stays verified whatever DNS says', () => {
  assert.is(statusAfterCheck({ status: 'verified', verifiedBy: 'operator' }, checks(['missing'], ['missing'], ['mismatch'])), 'verified');
});

test.run();
