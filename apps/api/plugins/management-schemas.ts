// TypeBox pieces shared by the management plugins, and what their routes answer. The answers
// are for the OpenAPI document (config.openapi.responses): they document, they do not
// serialize (the handlers build the bodies from the services' views), and
// test/openapi-management-answers-undocumented.int.test.ts checks real answers against them.
// A resource's `$id` names it in the document (components.schemas), where it is kept once.
import { Type, type TSchema } from '@sinclair/typebox';
import { Text } from './text.schemas.ts';

/** Every management id is [a-z0-9_] in practice; this is the spec's id rule, so templates' projectId fits too. */
export const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$' });

/** No C0, DEL or C1 control characters (apps/services/management/names.ts says why). */
const NO_CONTROL_CHARACTERS = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';

/** 1 to 100 characters (code points: an emoji is one, see ./text.schemas.ts); services trim and check again, so " " is refused too. */
export const Name = Text({
  minLength: 1, maxLength: 100, pattern: NO_CONTROL_CHARACTERS,
  errorMessage: 'must be 1 to 100 characters without control characters',
});

export const Address = Type.String({
  minLength: 3, maxLength: 254, pattern: NO_CONTROL_CHARACTERS,
  errorMessage: 'must be an email address of 3 to 254 characters without control characters',
});

export const Role = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('developer'), Type.Literal('viewer')]);
export const Environment = Type.Union([Type.Literal('development'), Type.Literal('production')]);
export const Permission = Type.Union([Type.Literal('email:send'), Type.Literal('email:read')]);

// ---------------------------------------------------------------------------------------
// Answers (apps/api/MANAGEMENT-API.md, Shapes)

const DateTime = Type.String({ format: 'date-time' });
const OrNull = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const NextCursor = OrNull(Type.String({ description: 'Pass as `cursor` for the next page; null on the last.' }));

export const User = Type.Object({ id: Type.String(), email: Type.String(), createdAt: DateTime }, { $id: 'User', additionalProperties: false });

/** POST /v1/session: the session cookie is set beside it. */
export const SignedIn = Type.Object({ user: User, expiresAt: DateTime }, { additionalProperties: false });

export const SessionView = Type.Object({
  user: User,
  expiresAt: DateTime,
  memberships: Type.Array(Type.Object({
    workspaceId: Type.String(), workspaceName: Type.String(), role: Role, activated: Type.Boolean(),
  }, { additionalProperties: false })),
}, { additionalProperties: false });

export const SignedOut = Type.Object({ signedOut: Type.Literal(true) }, { additionalProperties: false });

const workspaceFields = {
  id: Type.String(),
  name: Type.String(),
  activated: Type.Boolean({ description: 'Production sending allowed (an operator\'s act).' }),
  activatedAt: OrNull(DateTime),
  createdAt: DateTime,
  role: Role,
};
export const Workspace = Type.Object(workspaceFields, { $id: 'Workspace', additionalProperties: false, description: 'A workspace with the caller\'s role in it.' });
export const WorkspaceList = Type.Object({ workspaces: Type.Array(Workspace) }, { additionalProperties: false });

export const Member = Type.Object({ userId: Type.String(), email: Type.String(), role: Role, createdAt: DateTime }, { $id: 'Member', additionalProperties: false });

export const Invitation = Type.Object({
  id: Type.String(),
  workspaceId: Type.String(),
  workspaceName: Type.String(),
  email: Type.String(),
  role: Role,
  status: Type.Literal('pending'),
  createdAt: DateTime,
  expiresAt: DateTime,
}, { $id: 'Invitation', additionalProperties: false });
export const InvitationList = Type.Object({ invitations: Type.Array(Invitation) }, { additionalProperties: false });
export const InvitationDeleted = Type.Object({ deleted: Type.Literal(true), id: Type.String() }, { additionalProperties: false });

export const WorkspaceDetail = Type.Object({
  ...workspaceFields,
  members: Type.Array(Member),
  invitations: Type.Array(Invitation, { description: 'Pending.' }),
}, { additionalProperties: false });
export const MemberRemoved = Type.Object({ deleted: Type.Literal(true), userId: Type.String() }, { additionalProperties: false });

export const Project = Type.Object({
  id: Type.String(), workspaceId: Type.String(), name: Type.String(), environment: Environment, createdAt: DateTime,
}, { $id: 'Project', additionalProperties: false });
export const ProjectList = Type.Object({ projects: Type.Array(Project, { description: 'By name.' }) }, { additionalProperties: false });

const RecordPurpose = Type.Union([Type.Literal('dkim'), Type.Literal('mail_from_mx'), Type.Literal('mail_from_spf'), Type.Literal('dmarc')]);
const RecordType = Type.Union([Type.Literal('TXT'), Type.Literal('MX')]);

const DnsRecord = Type.Object({
  name: Type.String(),
  type: RecordType,
  value: Type.String({ description: 'TXT: the whole text; MX: the exchange host.' }),
  priority: Type.Optional(Type.Integer({ description: 'MX only.' })),
  purpose: RecordPurpose,
  required: Type.Boolean({ description: 'False for records recommended, not waited for (DMARC).' }),
  txtStrings: Type.Optional(Type.Array(Type.String(), { description: 'TXT only: the value cut in the strings of at most 255 characters it is published as.' })),
}, { additionalProperties: false });

const RecordCheck = Type.Object({
  purpose: RecordPurpose,
  name: Type.String(),
  type: RecordType,
  required: Type.Boolean(),
  status: Type.Union([Type.Literal('ok'), Type.Literal('missing'), Type.Literal('mismatch'), Type.Literal('error')]),
  expected: Type.String(),
  found: Type.Array(Type.String()),
  message: Type.String(),
}, { additionalProperties: false });

export const Domain = Type.Object({
  id: Type.String(),
  workspaceId: Type.String(),
  name: Type.String({ description: 'ASCII (punycode), lower case.' }),
  status: Type.Union([Type.Literal('pending'), Type.Literal('verified'), Type.Literal('failed')]),
  dkimSelector: Type.String({ description: 'The selector of the key that signs.' }),
  dkimRotation: OrNull(Type.Object({
    selector: Type.String(),
    record: OrNull(DnsRecord),
    startedAt: DateTime,
    check: OrNull(RecordCheck),
    checkedAt: OrNull(DateTime),
  }, { additionalProperties: false, description: 'A key rotation under way: the new key\'s record to publish beside the active one.' })),
  retiredDkimKeys: Type.Array(Type.Object({ selector: Type.String(), recordName: Type.String(), retiredAt: DateTime }, { additionalProperties: false })),
  mailFromDomain: Type.String(),
  records: Type.Array(DnsRecord, { description: 'The records to publish.' }),
  checks: OrNull(Type.Array(RecordCheck, { description: 'Per record, the last DNS check; null before the first.' })),
  lastCheckedAt: OrNull(DateTime),
  verifiedAt: OrNull(DateTime),
  verifiedBy: OrNull(Type.Union([Type.Literal('dns'), Type.Literal('operator')])),
  operatorNote: OrNull(Type.String()),
  projectIds: Type.Array(Type.String(), { description: 'The projects that send from it.' }),
  createdAt: DateTime,
}, { $id: 'Domain', additionalProperties: false });
export const DomainList = Type.Object({ domains: Type.Array(Domain, { description: 'By name.' }) }, { additionalProperties: false });

const apiKeyFields = {
  id: Type.String(),
  workspaceId: Type.String(),
  projectId: Type.String(),
  name: Type.String(),
  environment: Environment,
  preview: Type.String({ description: 'The secret\'s prefix and first 4 characters, to tell keys apart.' }),
  permissions: Type.Array(Permission),
  createdAt: DateTime,
  revokedAt: OrNull(DateTime),
};
export const ApiKey = Type.Object(apiKeyFields, { $id: 'ApiKey', additionalProperties: false });
export const CreatedApiKey = Type.Object({
  ...apiKeyFields,
  secret: Type.String({ pattern: '^rr_(test|live)_[A-Za-z0-9_-]{43}$', description: 'The key (rr_test_… or rr_live_…): shown in this answer only.' }),
}, { additionalProperties: false });
export const ApiKeyList = Type.Object({
  apiKeys: Type.Array(ApiKey, { description: 'Every live key (oldest first), then a page of the revoked ones (most recently revoked first).' }),
  next_cursor: NextCursor,
}, { additionalProperties: false });

export const Suppression = Type.Object({
  address: Type.String(),
  reason: Type.Union([Type.Literal('manual'), Type.Literal('hard_bounce'), Type.Literal('complaint')]),
  emailId: OrNull(Type.String({ description: 'The email whose bounce or complaint put it there; null for a manual entry and a BCC recipient\'s.' })),
  createdAt: DateTime,
}, { $id: 'Suppression', additionalProperties: false });
export const SuppressionList = Type.Object({ suppressions: Type.Array(Suppression, { description: 'In address order.' }), next_cursor: NextCursor }, { additionalProperties: false });
export const SuppressionRemoved = Type.Object({ deleted: Type.Literal(true), address: Type.String() }, { additionalProperties: false });

export const OutboxList = Type.Object({
  transport: Type.Union([Type.Literal('outbox'), Type.Literal('smtp'), Type.Literal('mx')], { description: 'RELAY_DELIVERY: only the outbox transport writes copies.' }),
  messages: Type.Array(Type.Object({
    emailId: Type.String(),
    subject: OrNull(Type.String()),
    toAddresses: Type.Array(Type.String()),
    createdAt: OrNull(DateTime),
    size: Type.Integer({ description: 'Bytes of the .eml.' }),
    writtenAt: DateTime,
  }, { additionalProperties: false }), { description: 'Newest email first.' }),
}, { additionalProperties: false });
