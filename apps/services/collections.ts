// Names of the document store's collections, in one place, so that adapters, rebuilds
// and tests agree on them.
export const COLLECTIONS = {
  users: 'users',
  sessions: 'sessions',
  workspaces: 'workspaces',
  memberships: 'memberships',
  /** Failed sign-ins per account and per client address (apps/services/management/sign-in-throttle.ts). */
  signInThrottles: 'sign_in_throttles',
  /** Pending invitations to workspaces, by email (apps/services/management/workspaces.ts). */
  invitations: 'invitations',
  projects: 'projects',
  domains: 'domains',
  apiKeys: 'api_keys',
  suppressions: 'suppressions',
  /** The bounces and complaints the suppressor is done with, kept past a removal of their entry (apps/services/management/suppression-sources.ts). */
  suppressionSources: 'suppression_sources',
  emails: 'emails',
  /** One document per email: its recipients' outcomes, what deliverability stats are summed from (projections/deliverability.ts). */
  deliverability: 'deliverability',
  usage: 'usage',
  checkpoints: 'checkpoints',
  contentKeys: 'content_keys',
  templates: 'templates',
  rateLimitSlots: 'rate_limit_slots',
  rateLimitWindows: 'rate_limit_windows',
  /** The sender's work: one document per email with a delivery step due (apps/processors/sender.ts). */
  deliveries: 'deliveries',
  sendRateSlots: 'send_rate_slots',
  webhookEndpoints: 'webhook_endpoints',
  /** A project's endpoint allowance, one document per slot taken (`<projectId>#<n>`): apps/services/webhooks/endpoints.ts. */
  webhookEndpointSlots: 'webhook_endpoint_slots',
  /** A workspace's pending-invitation allowance, one document per slot taken: apps/services/management/workspaces.ts. */
  invitationSlots: 'invitation_slots',
  /** A project's allowance of live API keys, one document per slot taken (`<projectId>#<n>`): apps/services/management/api-keys.ts. */
  apiKeySlots: 'api_key_slots',
  /** A workspace's allowance of projects, one document per slot taken: apps/services/management/projects.ts. */
  projectSlots: 'project_slots',
  /** The workspaces a user may create, one document per slot taken (`<userId>#<n>`): apps/services/management/workspaces.ts. */
  workspaceSlots: 'workspace_slots',
  /** A project's allowance of templates, one document per slot taken: apps/services/templates/templates.ts. */
  templateSlots: 'template_slots',
  /** One document per (webhook event, endpoint): its state, schedule and attempt logs. */
  webhookDeliveries: 'webhook_deliveries',
  /** Events a processor or a rebuild could not apply and went past (apps/services/parked-events.ts). */
  parkedEvents: 'parked_events',
  /** The scratch collections rebuilds made, so that `relay projections drop` drops only those (apps/services/scratch-collections.ts). */
  scratchCollections: 'scratch_collections',
  /** TLS session outcomes counted per day, recipient domain, policy and result, for TLS reports (apps/services/tls-reports/). */
  tlsSessionCounts: 'tls_session_counts',
  /** One document per (day, domain) TLS report: claimed by the instance that sends it. */
  tlsReports: 'tls_reports',
  /** MTA-STS policies as fetched, by recipient domain (apps/services/mta-sts-policies.ts). */
  mtaStsPolicies: 'mta_sts_policies',
  /** What each sender instance's sites are doing (apps/services/delivery/sites.ts), for `relay sites`. */
  sites: 'sites',
} as const;
