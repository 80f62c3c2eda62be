// The management model the service cannot run without: users, workspaces, memberships,
// projects, sending domains, API keys and suppressions. Pure types and rules only.
import { characterCount } from './text.ts';
import type { AllowanceSettings } from './usage/quota.ts';

export type Role = 'owner' | 'admin' | 'developer' | 'viewer';
export type Environment = 'development' | 'production';
export type Permission = 'email:send' | 'email:read';

export const ROLES: readonly Role[] = ['owner', 'admin', 'developer', 'viewer'];
export const PERMISSIONS: readonly Permission[] = ['email:send', 'email:read'];

export interface User {
  _id: string;
  email: string;
  passwordHash: string;
  createdAt: string;
}

export interface Session {
  /** sha256 of the cookie token: a leaked database does not leak live sessions. */
  _id: string;
  userId: string;
  createdAt: string;
  expiresAt: string;
}

export interface Workspace {
  _id: string;
  name: string;
  /** Set only by an operator after administrator review; production keys need it. */
  activated: boolean;
  activatedAt: string | null;
  createdAt: string;
  /** Monthly recipient allowances the operator set (`relay workspace quota`); absent: the spec's. */
  allowances?: AllowanceSettings;
}

export interface Membership {
  /** `${workspaceId}:${userId}` so one user has at most one role per workspace. */
  _id: string;
  workspaceId: string;
  userId: string;
  role: Role;
  createdAt: string;
}

export interface Project {
  _id: string;
  workspaceId: string;
  name: string;
  environment: Environment;
  createdAt: string;
}

export interface ApiKey {
  _id: string;
  workspaceId: string;
  projectId: string;
  name: string;
  environment: Environment;
  /** sha256 hex of the whole secret; the secret itself is shown once and never stored. */
  secretHash: string;
  /** First characters of the secret, so people can tell keys apart. */
  preview: string;
  permissions: Permission[];
  createdAt: string;
  revokedAt: string | null;
}

export interface SuppressionEntry {
  /** `${workspaceId}:${address}`: one entry per address and workspace. */
  _id: string;
  workspaceId: string;
  address: string;
  reason: 'manual' | 'hard_bounce' | 'complaint';
  /** Email whose bounce or complaint caused it; null for manual blocks and for a BCC recipient's (never tied to its email). */
  emailId: string | null;
  createdAt: string;
  /** Event id of the bounce/complaint that last wrote this entry (idempotent projection); for a BCC recipient's block, the block's own RecipientSuppressed id. */
  lastEventId: string | null;
}

export const keyPrefixOf = (environment: Environment): string => (environment === 'production' ? 'rr_live_' : 'rr_test_');

/** Roles allowed to change a workspace's projects, domains, keys and templates. */
export const canWrite = (role: Role): boolean => role !== 'viewer';
/** Roles allowed to add and remove manual suppressions (the spec: owners and administrators). */
export const canManageSuppressions = (role: Role): boolean => role === 'owner' || role === 'admin';

// ---------------------------------------------------------------------------------------
// Roles

const ROLE_RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2, owner: 3 };

export const roleAtLeast = (role: Role, minimum: Role): boolean => ROLE_RANK[role] >= ROLE_RANK[minimum];

/** Owners may hand out any role; admins every role but owner; nobody else adds members. */
export const canGrantRole = (actor: Role, granted: Role): boolean =>
  actor === 'owner' || (actor === 'admin' && granted !== 'owner');

// ---------------------------------------------------------------------------------------
// Addresses

/**
 * How user logins and suppressed recipients are compared: trimmed and lower-cased whole.
 * Local parts are case-sensitive in theory (RFC 5321 2.4) but no mail system in use treats
 * them so, and a block that `Bob@x` slips past is worse than one too many.
 */
export const normalizeAddress = (input: string): string => input.trim().toLowerCase();

/** One "@", a non-empty local part, a dotted domain, no spaces or angle brackets; at most 254 characters (RFC 5321 4.5.3.1.3). */
export const isPlainAddress = (address: string): boolean =>
  address.length <= 254 && /^[^\s@<>()",;:\\[\]]+@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/i.test(address);

export const suppressionIdOf = (workspaceId: string, address: string): string => `${workspaceId}:${normalizeAddress(address)}`;
export const membershipIdOf = (workspaceId: string, userId: string): string => `${workspaceId}:${userId}`;

// ---------------------------------------------------------------------------------------
// Passwords and sessions

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 1024;

/**
 * Why a new password is refused, or null. Length only, in characters (domain/text.ts), as the
 * sign-in schema counts them: composition rules make passwords worse (NIST SP 800-63B 3.1.1.2).
 */
export function passwordProblem(password: string): string | null {
  const characters = characterCount(password);
  if (characters < PASSWORD_MIN_LENGTH) return `password must be at least ${PASSWORD_MIN_LENGTH} characters`;
  if (characters > PASSWORD_MAX_LENGTH) return `password must be at most ${PASSWORD_MAX_LENGTH} characters`;
  return null;
}

/**
 * The dashboard cookie (spec: Authentication 5). `__Host-` makes browsers insist on Secure,
 * Path=/ and no Domain, which needs https: production only.
 */
export const sessionCookieNameFor = (env: Environment): string => (env === 'production' ? '__Host-rr_session' : 'rr_session');

/** A session unused this long ends. */
export const SESSION_IDLE_MS = 14 * 24 * 3600_000;
/** No session outlives this, however active: a stolen cookie stops working eventually. */
export const SESSION_MAX_MS = 30 * 24 * 3600_000;
/** The sliding expiry is written back at most this often, not on every request. */
export const SESSION_REFRESH_MS = 3600_000;

/** Expiry after activity at `now`: idle window from now, never past the absolute cap. */
export function slidingExpiry(createdAt: string, now: Date): string {
  const cap = Date.parse(createdAt) + SESSION_MAX_MS;
  return new Date(Math.min(now.getTime() + SESSION_IDLE_MS, cap)).toISOString();
}

export const sessionIsLive = (session: Session, now: Date): boolean => Date.parse(session.expiresAt) > now.getTime();

/** Whether activity at `now` should push the stored expiry forward. */
export const sessionNeedsRefresh = (session: Session, now: Date): boolean =>
  Date.parse(slidingExpiry(session.createdAt, now)) - Date.parse(session.expiresAt) >= SESSION_REFRESH_MS;

// ---------------------------------------------------------------------------------------
// Sending domains

/**
 * pending: not verified yet, records not (all) published. failed: a record is published but
 * wrong, or a domain that was verified lost a record. verified: every required record checked.
 */
export type DomainStatus = 'pending' | 'verified' | 'failed';

export type RecordPurpose = 'dkim' | 'mail_from_mx' | 'mail_from_spf' | 'dmarc';
export type CheckStatus = 'ok' | 'missing' | 'mismatch' | 'error';

/** Same shape as domain/sending-domain.ts's RecordCheck, kept here as stored data. */
export interface StoredRecordCheck {
  purpose: RecordPurpose;
  name: string;
  type: 'TXT' | 'MX';
  required: boolean;
  status: CheckStatus;
  expected: string;
  found: string[];
  message: string;
}

/**
 * The records to publish are not stored: they follow from the key, the MAIL FROM label and
 * the operator's current mail host (domain/sending-domain.ts requiredRecords), so a changed
 * RELAY_MAIL_HOST shows up at once in what customers are asked to publish.
 */
/**
 * A DKIM key made by a rotation (domain/dkim-rotation.ts) and not signing yet: its record is to
 * be published, and the key takes over once DNS shows it.
 */
export interface PendingDkimKey {
  selector: string;
  publicKeyBase64: string;
  /** Sealed as the active key is (apps/services/dkim-key-vault.ts). */
  privateKeySealed: string;
  startedAt: string;
  /** The last DNS check of its record; null before the first. */
  check: StoredRecordCheck | null;
  checkedAt: string | null;
}

/**
 * A key that signed until a rotation completed. Only its public half is kept: nothing signs with
 * it again, and its selector is never handed out again (its record may still be published).
 */
export interface RetiredDkimKey {
  selector: string;
  publicKeyBase64: string;
  retiredAt: string;
}

export interface SendingDomain {
  _id: string;
  workspaceId: string;
  /** Canonical ASCII name (punycode), lower case, no trailing dot. */
  name: string;
  /** The active key: what mail is signed with, and what verification and the re-check ask DNS for. */
  dkimSelector: string;
  dkimPublicKeyBase64: string;
  /**
   * The PKCS#8 PEM private key, sealed with Relay's secret (apps/services/dkim-key-vault.ts);
   * the sender signs with it. Never leaves the server.
   */
  dkimPrivateKeySealed: string;
  /** Domains created before keys were sealed; sealed and removed at the next start. */
  dkimPrivateKeyPem?: string;
  /** A rotation under way; null or absent when none is (domain/dkim-rotation.ts). */
  dkimRotation?: PendingDkimKey | null;
  /**
   * A rotation start under way (its key being made): which start took the domain, and when; other
   * starts are refused meanwhile rather than make keys that would lose (apps/services/management/dkim-rotations.ts).
   */
  dkimRotationClaim?: { id: string; at: string } | null;
  /** Keys earlier rotations retired, newest first. */
  dkimRetiredKeys?: RetiredDkimKey[];
  /** Label(s) before the domain forming the envelope sender domain, e.g. "bounce". */
  mailFromSubdomain: string;
  status: DomainStatus;
  /** Per-record results of the last DNS check; null before the first. */
  checks: StoredRecordCheck[] | null;
  lastCheckedAt: string | null;
  verifiedAt: string | null;
  /** 'dns': the records were seen; 'operator': an operator vouched for the domain (local use). */
  verifiedBy: 'dns' | 'operator' | null;
  /** Why an operator marked the domain verified. */
  operatorNote: string | null;
  /**
   * The periodic re-check (domain/domain-recheck.ts): since when every re-check found a required
   * record wrong, null (or absent) while none does; and when a process took the domain's
   * re-check, so that others leave it alone meanwhile.
   */
  recheckFailingSince?: string | null;
  recheckClaimedAt?: string | null;
  /** Projects of the same workspace that may send from this domain. */
  projectIds: string[];
  createdAt: string;
}

export const MAIL_FROM_SUBDOMAIN = 'bounce';

/**
 * Status after a DNS check. A lookup that failed (timeout, SERVFAIL) says nothing about the
 * records, so it changes nothing. An operator's vouching stands against DNS: it exists for
 * domains DNS cannot show (local, test), and only an operator takes it back.
 */
export function statusAfterCheck(
  domain: Pick<SendingDomain, 'status' | 'verifiedBy'>,
  checks: ReadonlyArray<Pick<StoredRecordCheck, 'required' | 'status'>>,
): DomainStatus {
  const required = checks.filter((c) => c.required);
  if (required.every((c) => c.status === 'ok')) return 'verified';
  if (domain.status === 'verified' && domain.verifiedBy === 'operator') return 'verified';
  const conclusive = required.filter((c) => c.status !== 'error');
  if (conclusive.every((c) => c.status === 'ok')) return domain.status;
  if (domain.status === 'verified' || conclusive.some((c) => c.status === 'mismatch')) return 'failed';
  return 'pending';
}
