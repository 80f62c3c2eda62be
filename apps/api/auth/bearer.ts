// API key authentication for the /v1/emails endpoints: "Authorization: Bearer rr_test_…".
// Every failure to identify a live key is the same 401, so callers cannot probe which keys
// exist or were revoked.
import { RelayError } from '../../../domain/errors.ts';
import { keyPrefixOf, type Environment, type Permission, type Workspace } from '../../../domain/management.ts';
import { allowancesOf, type MonthlyAllowances } from '../../../domain/usage/quota.ts';
import { findApiKeyBySecret } from '../../services/management/api-keys.ts';
import { reusedReads } from '../../services/management/reused-reads.ts';
import { workspacesOf } from '../../services/management/workspaces.ts';
import type { ApiContext } from '../context.ts';

export interface ApiKeyPrincipal {
  keyId: string;
  projectId: string;
  workspaceId: string;
  environment: Environment;
  permissions: Permission[];
  workspaceActivated: boolean;
  /** The workspace's monthly allowances as they stand at this request. */
  allowances: MonthlyAllowances;
}

/** Prefix + 43 base64url characters (32 bytes); anything else cannot be a key of ours. */
const KEY_SHAPE = new RegExp(`^(?:${keyPrefixOf('development')}|${keyPrefixOf('production')})[A-Za-z0-9_-]{43}$`);

export async function authenticateApiKey(ctx: Pick<ApiContext, 'documents'>, authorizationHeader: string | undefined): Promise<ApiKeyPrincipal> {
  const invalid = (why: string) => new RelayError('invalid_api_key', why);
  if (authorizationHeader === undefined || authorizationHeader.trim() === '') throw invalid('missing API key: send Authorization: Bearer <API_KEY>');
  const match = /^Bearer +(\S+) *$/i.exec(authorizationHeader);
  if (!match) throw invalid('the Authorization header must be "Bearer <API_KEY>"');
  const secret = match[1];
  if (!KEY_SHAPE.test(secret)) throw invalid('invalid API key');
  const key = await findApiKeyBySecret(ctx.documents, secret);
  if (!key || key.revokedAt !== null) throw invalid('invalid API key');
  // Reused like the key (activation and allowances change rarely; see reused-reads.ts).
  const workspace = await reusedReads<Workspace | null>(ctx.documents, 'workspaces').get(key.workspaceId, () => workspacesOf(ctx.documents).get(key.workspaceId));
  if (!workspace) throw invalid('invalid API key');
  if (key.environment === 'production' && !workspace.activated) {
    throw new RelayError('production_not_enabled', 'production keys work once the workspace is activated by an administrator');
  }
  return {
    keyId: key._id,
    projectId: key.projectId,
    workspaceId: key.workspaceId,
    environment: key.environment,
    permissions: [...key.permissions],
    workspaceActivated: workspace.activated,
    allowances: allowancesOf(workspace.allowances),
  };
}

export function requirePermission(principal: ApiKeyPrincipal, permission: Permission): void {
  if (!principal.permissions.includes(permission)) throw new RelayError('forbidden', `this API key lacks the ${permission} permission`);
}
