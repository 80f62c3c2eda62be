// One non-interactive path from an empty data directory to a working API key:
// user → workspace (owned) → project → verified domain connected to it → key (+ a session).
// Re-running with the same names reuses what exists and adds a fresh key; nothing is deleted.
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { randomBytes } from 'node:crypto';
import { RelayError, validationError } from '../../../domain/errors.ts';
import { PERMISSIONS, sessionCookieNameFor, type Environment, type User } from '../../../domain/management.ts';
import type { RecordCheck } from '../../../domain/sending-domain.ts';
import type { RelayConfig } from '../../../infra/config.ts';
import type { DnsLookup } from '../../../infra/ports/dns.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { createApiKey } from './api-keys.ts';
import {
  connectDomain, createDomain, domainView, findDomainByName, markDomainVerified, newSendingDomainName, verifyDomain, type DomainRecordView,
} from './domains.ts';
import { ensureManagementIndexes } from './indexes.ts';
import { normalizeName } from './names.ts';
import { verifyPassword } from './passwords.ts';
import { createProject, findProjectByName } from './projects.ts';
import { createSession } from './sessions.ts';
import { createUser, findUserByEmail, normalizeUserEmail } from './users.ts';
import { createWorkspace, listWorkspacesOf, setWorkspaceActivation, workspacesOf } from './workspaces.ts';

export interface SetupOptions {
  email: string;
  /** Only used when the user does not exist yet; absent: a random one is generated and returned. */
  password?: string;
  workspace: string;
  project: string;
  environment: Environment;
  domain: string;
  /** Activate the workspace (what production keys need): an operator decision. */
  activate: boolean;
  /** Mark the domain verified by the operator when DNS does not show its records. */
  trustDomain: boolean;
}

export interface SetupResult {
  userId: string;
  email: string;
  workspaceId: string;
  projectId: string;
  environment: Environment;
  domainId: string;
  domain: string;
  domainVerifiedBy: 'dns' | 'operator';
  apiKey: string;
  keyId: string;
  /** "name=value", ready for a Cookie header (curl -b) on the session endpoints. */
  sessionCookie: string;
  /** Present only when setup generated the new user's password. */
  password?: string;
}

export type SetupOutcome =
  | { ok: true; result: SetupResult }
  | {
    ok: false; error: 'domain_not_verified'; message: string; domainId: string; domain: string; records: DomainRecordView[]; checks: RecordCheck[] | null;
    /** The user's; `password` as in SetupResult: the user stays, and a rerun reuses it without one. */
    email: string; password?: string;
  };

type Progress = { ok: true; result: Omit<SetupResult, 'password'> } | Omit<Extract<SetupOutcome, { ok: false }>, 'email' | 'password'>;

export interface SetupDeps {
  documents: DocumentStore;
  config: Pick<RelayConfig, 'env' | 'mailHost' | 'dnsServers'>;
  /** Real DNS; null: do not ask DNS (only sensible with trustDomain). */
  dns: DnsLookup | null;
  /** Seals the DKIM private key of a domain it creates. */
  secrets: SecretBox;
  now: () => Date;
  /** Progress lines for a human (stderr in the CLI). */
  log: (line: string) => void;
}

async function ensureUser(deps: SetupDeps, options: SetupOptions): Promise<{ user: User; generatedPassword?: string }> {
  const { documents, now, log } = deps;
  const existing = await findUserByEmail(documents, options.email);
  if (existing) {
    log(`reusing user ${existing.email} (${existing._id})`);
    if (options.password !== undefined && !(await verifyPassword(options.password, existing.passwordHash))) {
      log(`warning: the given password is not ${existing.email}'s current password; it was left unchanged`);
    }
    return { user: existing };
  }
  const generatedPassword = options.password === undefined ? randomBytes(18).toString('base64url') : undefined;
  try {
    const user = await createUser(documents, { email: options.email, password: options.password ?? generatedPassword! }, now());
    log(`created user ${user.email} (${user._id})`);
    return { user, generatedPassword };
  } catch (error) {
    // Another setup created the same user meanwhile: use that one.
    if (!(error instanceof RelayError && error.code === 'conflict')) throw error;
    const user = await findUserByEmail(documents, options.email);
    if (!user) throw error;
    return { user };
  }
}

/**
 * What setup refuses about its input, checked before the first write: a typo in --domain, or a
 * name too long for its DNS records, must not leave a new user, workspace and project behind.
 * Messages name the flags. (A weak password is refused by createUser, which is itself the first
 * write.)
 */
function checkOptions(options: SetupOptions, now: Date): void {
  normalizeUserEmail(options.email);
  normalizeName(options.workspace, '--workspace');
  normalizeName(options.project, '--project');
  newSendingDomainName(options.domain, now, '--domain');
}

export async function runSetup(deps: SetupDeps, options: SetupOptions): Promise<SetupOutcome> {
  checkOptions(options, deps.now());
  await ensureManagementIndexes(deps.documents);
  const { user, generatedPassword } = await ensureUser(deps, options);
  let progress: Progress;
  try {
    progress = await setUpFor(deps, options, user);
  } catch (error) {
    // The user stays whatever failed after it was made: the only time its password can be told.
    if (generatedPassword !== undefined) deps.log(`generated password for ${user.email}: ${generatedPassword}`);
    throw error;
  }
  const told = generatedPassword === undefined ? {} : { password: generatedPassword };
  return progress.ok ? { ok: true, result: { ...progress.result, ...told } } : { ...progress, email: user.email, ...told };
}

/** Everything after the user: its workspace, project, domain, key and session. */
async function setUpFor(deps: SetupDeps, options: SetupOptions, user: User): Promise<Progress> {
  const { documents, now, log } = deps;
  // Workspace: one the user owns with that name, else a new one.
  const workspaceName = options.workspace.trim();
  const owned = (await listWorkspacesOf(documents, user._id)).find((w) => w.role === 'owner' && w.name === workspaceName);
  let workspaceId: string;
  if (owned) {
    workspaceId = owned.id;
    log(`reusing workspace "${owned.name}" (${workspaceId})`);
  } else {
    workspaceId = (await createWorkspace(documents, user, workspaceName, now())).workspace._id;
    log(`created workspace "${workspaceName}" (${workspaceId})`);
  }
  if (options.activate) {
    await setWorkspaceActivation(documents, workspaceId, true, now());
    log('workspace activated for production sending');
  } else if (options.environment === 'production' && !(await workspacesOf(documents).get(workspaceId))?.activated) {
    log('warning: the workspace is not activated, so the production key is refused until `relay workspace activate` (or --activate)');
  }

  // Project
  let project = await findProjectByName(documents, workspaceId, options.project);
  if (project && project.environment !== options.environment) {
    throw validationError(`project "${project.name}" already exists as ${project.environment}; choose another --project name for ${options.environment}`);
  }
  if (!project) {
    try {
      project = await createProject(documents, { workspaceId, name: options.project, environment: options.environment }, now());
      log(`created ${options.environment} project "${project.name}" (${project._id})`);
    } catch (error) {
      if (!(error instanceof RelayError && error.code === 'conflict')) throw error;
      project = await findProjectByName(documents, workspaceId, options.project);
      if (!project) throw error;
    }
  } else {
    log(`reusing project "${project.name}" (${project._id})`);
  }

  // Domain
  let domain = await findDomainByName(documents, workspaceId, options.domain);
  if (!domain) {
    try {
      domain = await createDomain(documents, { workspaceId, name: options.domain }, now(), deps.secrets);
      log(`created domain ${domain.name} (${domain._id}) with DKIM selector ${domain.dkimSelector}`);
    } catch (error) {
      if (!(error instanceof RelayError && error.code === 'conflict')) throw error;
      domain = await findDomainByName(documents, workspaceId, options.domain);
      if (!domain) throw error;
    }
  }
  if (domain.status !== 'verified' && deps.dns) {
    log(`checking DNS for ${domain.name}${deps.config.dnsServers.length ? ` via ${deps.config.dnsServers.join(', ')}` : ''}`);
    domain = await verifyDomain(documents, deps.config, deps.dns, domain._id, now());
    log(domain.status === 'verified' ? `domain ${domain.name} verified through DNS` : `domain ${domain.name} is ${domain.status} in DNS`);
  }
  if (domain.status !== 'verified') {
    if (!options.trustDomain) {
      const view = domainView(domain, deps.config);
      return {
        ok: false,
        error: 'domain_not_verified',
        message: `publish the DNS records for ${domain.name} and run setup again (or pass --trust-domain for a local domain)`,
        domainId: domain._id,
        domain: domain.name,
        records: view.records,
        checks: view.checks,
      };
    }
    domain = await markDomainVerified(documents, domain._id, 'relay setup --trust-domain: the operator vouched for the domain without DNS', now());
    log(`domain ${domain.name} marked verified by the operator (--trust-domain)`);
  }
  await connectDomain(documents, domain._id, project._id);

  // Key and session
  const { key, secret } = await createApiKey(documents, { project, name: `setup ${now().toISOString()}`, permissions: [...PERMISSIONS] }, now());
  log(`created API key ${key._id} (${key.preview}…) with ${key.permissions.join(', ')}`);
  const { token } = await createSession(documents, user._id, now());

  return {
    ok: true,
    result: {
      userId: user._id,
      email: user.email,
      workspaceId,
      projectId: project._id,
      environment: project.environment,
      domainId: domain._id,
      domain: domain.name,
      domainVerifiedBy: domain.verifiedBy ?? 'operator',
      apiKey: secret,
      keyId: key._id,
      sessionCookie: `${sessionCookieNameFor(deps.config.env)}=${token}`,
    },
  };
}
