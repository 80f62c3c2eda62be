// The operator's management commands. Everything for people goes to stderr; stdout carries
// only results (one JSON object with --json), so scripts can pipe them.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { notFound, RelayError } from '../../domain/errors.ts';
import type { Environment } from '../../domain/management.ts';
import { allowancesOf, DEFAULT_ALLOWANCES, MAX_ALLOWANCE, monthEnd } from '../../domain/usage/quota.ts';
import { loadConfig, type RelayConfig } from '../../infra/config.ts';
import { createDnsLookup } from '../../infra/dns/resolver.ts';
import { openServices, openStores, type StoresWithoutLog } from '../runtime.ts';
import { cancelDomainDkimRotation, startDomainDkimRotation } from '../services/management/dkim-rotations.ts';
import { domainView, markDomainVerified, verifyDomain, type DomainView } from '../services/management/domains.ts';
import { ensureManagementIndexes } from '../services/management/indexes.ts';
import { runSetup } from '../services/management/setup.ts';
import { createUser } from '../services/management/users.ts';
import { setWorkspaceActivation, setWorkspaceAllowances, workspacesOf } from '../services/management/workspaces.ts';
import { UsageLedger } from '../services/usage-ledger.ts';
import { asksForHelp, type Command } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printable, printableJson } from './printable.ts';

const EXIT_USAGE = 2;
const EXIT_NOT_VERIFIED = 3;

/** Lines for the operator's terminal: names, messages and DNS answers come from customers. */
const err = (line: string) => process.stderr.write(`${printable(line)}\n`);
const out = (value: unknown) => process.stdout.write(`${printableJson(value, 2)}\n`);

class UsageError extends Error {}
/** No Relay to act on; openExistingStores said why. */
class NoRelayError extends Error {}

function parse<T extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/**
 * Opens the stores, makes sure the management indexes exist, runs `work`, closes. Only `setup`
 * and `user create` may make a new Relay ('create'); the others act on a workspace or domain
 * that must exist, so a data directory holding no Relay is refused instead of made ('existing').
 * No task uses the log: it stays closed, so they work while Kafka's brokers are down.
 */
async function withStores<T>(open: 'create' | 'existing', work: (stores: StoresWithoutLog, config: RelayConfig) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const stores = open === 'create' ? await openStores(config, { withoutLog: true }) : await openExistingStores(config);
  if (!stores) throw new NoRelayError();
  try {
    await ensureManagementIndexes(stores.documents);
    return await work(stores, config);
  } finally {
    await stores.close();
  }
}

/** Usage mistakes exit 2 with the usage; refused operations (RelayError) exit 1 with their code. */
function command(usage: string, body: (args: string[]) => Promise<number>): Command {
  return async (args) => {
    if (asksForHelp(args)) {
      process.stdout.write(`${usage}\n`); // asked for: the result, not a message
      return 0;
    }
    try {
      return await body(args);
    } catch (error) {
      if (error instanceof UsageError) {
        err(`relay: ${error.message}\n\n${usage}`);
        return EXIT_USAGE;
      }
      if (error instanceof RelayError) {
        err(`relay: ${error.code}: ${error.message}`);
        return 1;
      }
      if (error instanceof NoRelayError) return 1;
      throw error;
    }
  };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

export const userCommand: Command = command(
  'usage: relay user create --email E [--password P] [--json]\n  The password may also come from RELAY_PASSWORD or, piped, from stdin.',
  async (args) => {
    const { values, positionals } = parse(args, { email: { type: 'string' }, password: { type: 'string' }, json: { type: 'boolean' } });
    if (positionals[0] !== 'create' || positionals.length !== 1) throw new UsageError('expected: user create');
    if (!values.email) throw new UsageError('--email is required');
    let password = values.password ?? process.env.RELAY_PASSWORD;
    if (password === undefined) {
      if (process.stdin.isTTY) throw new UsageError('give the password with --password, RELAY_PASSWORD or on stdin');
      password = await readStdin();
    }
    const user = await withStores('create', ({ documents }) => createUser(documents, { email: values.email!, password: password! }, new Date()));
    if (values.json) out({ userId: user._id, email: user.email });
    else process.stdout.write(`${user._id}\n`);
    err(`created user ${user.email} (${user._id})`);
    return 0;
  },
);

const WORKSPACE_USAGE = `usage: relay workspace activate <workspaceId>
       relay workspace deactivate <workspaceId>
       relay workspace quota <workspaceId> [--recipients N|default] [--dev-key-recipients N|default] [--json]
  quota: shows the workspace's monthly recipient allowances and this month's usage; with
  --recipients or --dev-key-recipients, sets them first. --recipients: accepted To/CC/BCC
  recipients per UTC month, all projects and keys together (default ${DEFAULT_ALLOWANCES.workspaceRecipients}); --dev-key-recipients:
  per development key and month (default ${DEFAULT_ALLOWANCES.developmentKeyRecipients}). N is 0 (no sending) to ${MAX_ALLOWANCE}; "default" returns
  to the default. A change applies from the next request on; usage already counted stays.`;

/** "default" → null (back to the spec's), else the number as given (checked by the service). */
function allowanceArgument(option: string, raw: string | undefined): number | null | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'default') return null;
  if (!/^\d+$/.test(raw)) throw new UsageError(`--${option} must be a whole number or "default", got "${raw}"`);
  return Number(raw);
}

const grouped = (n: number) => n.toLocaleString('en-US');

async function workspaceQuota(workspaceId: string, values: { recipients?: string; 'dev-key-recipients'?: string; json?: boolean }): Promise<number> {
  const changes = {
    workspaceRecipients: allowanceArgument('recipients', values.recipients),
    developmentKeyRecipients: allowanceArgument('dev-key-recipients', values['dev-key-recipients']),
  };
  const now = new Date();
  const { workspace, usage } = await withStores('existing', async ({ documents, events }) => {
    const changed = changes.workspaceRecipients !== undefined || changes.developmentKeyRecipients !== undefined;
    const workspace = changed
      ? await setWorkspaceAllowances(documents, workspaceId, changes)
      : await workspacesOf(documents).get(workspaceId);
    if (!workspace) throw notFound(`workspace ${workspaceId} not found`);
    const ledger = new UsageLedger(events);
    try {
      return { workspace, usage: await ledger.usage(workspaceId, now) };
    } finally {
      ledger.close();
    }
  });
  const allowances = allowancesOf(workspace.allowances);
  const resetsAt = monthEnd(usage.month).toISOString();
  if (values.json) {
    out({
      workspaceId: workspace._id, month: usage.month, resetsAt, allowances, set: workspace.allowances ?? {},
      used: { workspaceRecipients: usage.workspaceRecipients, byKey: usage.byKey },
    });
  }
  const origin = (name: keyof typeof allowances) => (workspace.allowances?.[name] === undefined ? 'default' : 'set by the operator');
  err(`workspace ${workspace.name} (${workspace._id}), ${usage.month} (resets at ${resetsAt}):`);
  err(`  recipients this month: ${grouped(usage.workspaceRecipients)} of ${grouped(allowances.workspaceRecipients)} (${origin('workspaceRecipients')})`);
  err(`  per development key:   at most ${grouped(allowances.developmentKeyRecipients)} (${origin('developmentKeyRecipients')})`);
  return 0;
}

export const workspaceCommand: Command = command(WORKSPACE_USAGE, async (args) => {
  const { values, positionals } = parse(args, { recipients: { type: 'string' }, 'dev-key-recipients': { type: 'string' }, json: { type: 'boolean' } });
  const [action, workspaceId] = positionals;
  if (!['activate', 'deactivate', 'quota'].includes(action) || !workspaceId || positionals.length !== 2) {
    throw new UsageError('expected: workspace activate|deactivate|quota <workspaceId>');
  }
  if (action === 'quota') return workspaceQuota(workspaceId, values);
  if (values.recipients !== undefined || values['dev-key-recipients'] !== undefined || values.json) throw new UsageError(`workspace ${action} takes no options`);
  const workspace = await withStores('existing', ({ documents }) => setWorkspaceActivation(documents, workspaceId, action === 'activate', new Date()));
  err(`workspace ${workspace.name} (${workspace._id}) is ${workspace.activated ? `activated since ${workspace.activatedAt}` : 'not activated'}`);
  return 0;
});

const DOMAIN_USAGE = `usage: relay domain verify <domainId> [--json]          check the records in DNS (RELAY_DNS_SERVERS or the system resolvers)
       relay domain mark-verified <domainId> --reason TEXT   operator override, e.g. for a local test domain
       relay domain rotate-dkim <domainId> [--selector S] [--json]
       relay domain cancel-rotation <domainId> [--json]
  rotate-dkim: makes a new DKIM key under a new selector (default rr<date><random>) and prints
  its TXT record to publish; mail stays signed with the current key until the new record is
  found, which completes the rotation: the re-check (\`relay start\` or the retention part) looks
  for it every few minutes, \`domain verify\` at once. Keep the old selector's record published
  a few days after that, for messages signed before the switch. cancel-rotation drops the new key.`;

function printRotation(view: DomainView): void {
  const rotation = view.dkimRotation;
  if (!rotation) {
    err(`domain ${view.name} signs with selector ${view.dkimSelector}; no rotation pending`);
    return;
  }
  err(`domain ${view.name} signs with selector ${view.dkimSelector}; rotation to selector ${rotation.selector} pending. Publish:`);
  if (rotation.record) err(`  TXT ${rotation.record.name}  ${rotation.record.value}`);
  err(`Relay looks for it every few minutes and switches to the new key once it is there; to look now: relay domain verify ${view.id}`);
}

export const domainCommand: Command = command(DOMAIN_USAGE, async (args) => {
  const { values, positionals } = parse(args, { reason: { type: 'string' }, json: { type: 'boolean' }, selector: { type: 'string' } });
  const [action, domainId] = positionals;
  if (!domainId || positionals.length !== 2) throw new UsageError('expected: domain verify|mark-verified|rotate-dkim|cancel-rotation <domainId>');
  if (values.selector !== undefined && action !== 'rotate-dkim') throw new UsageError('--selector is for rotate-dkim');
  if (action === 'verify') {
    const view = await withStores('existing', async ({ documents }, config) =>
      domainView(await verifyDomain(documents, config, createDnsLookup(config.dnsServers), domainId, new Date()), config),
    );
    if (values.json) out(view);
    for (const check of view.checks ?? []) err(`${check.status.padEnd(8)} ${check.type.padEnd(3)} ${check.name}${check.required ? '' : ' (recommended)'}: ${check.message}`);
    if (view.dkimRotation?.check) err(`rotation: ${view.dkimRotation.check.status} ${view.dkimRotation.check.message}`);
    err(`domain ${view.name} is ${view.status}, signing with selector ${view.dkimSelector}${view.dkimRotation ? ` (rotation to ${view.dkimRotation.selector} pending)` : ''}`);
    return view.status === 'verified' ? 0 : 1;
  }
  if (action === 'mark-verified') {
    if (!values.reason?.trim()) throw new UsageError('--reason is required: it is kept with the domain');
    const domain = await withStores('existing', ({ documents }) => markDomainVerified(documents, domainId, `operator: ${values.reason}`, new Date()));
    err(`domain ${domain.name} (${domain._id}) marked verified by the operator`);
    return 0;
  }
  if (action === 'rotate-dkim' || action === 'cancel-rotation') {
    const view = await withStores('existing', async (stores, config) => {
      if (action === 'cancel-rotation') return domainView(await cancelDomainDkimRotation(stores.documents, domainId), config);
      // The new private key is sealed with the secret key, as the active one is.
      const services = await openServices(config, stores);
      try {
        const input = { domainId, selector: values.selector, selectorField: '--selector' };
        return domainView(await startDomainDkimRotation(stores.documents, input, new Date(), services.secrets), config);
      } finally {
        await services.close();
      }
    });
    if (values.json) out(view);
    printRotation(view);
    return 0;
  }
  throw new UsageError(`unknown action "${action}"`);
});

const SETUP_USAGE = `usage: relay setup [--json] [--email E] [--password P] [--workspace NAME] [--project NAME]
                   [--environment development|production] [--domain NAME] [--activate] [--trust-domain]
  Creates (or reuses) the user, an owned workspace, a project, a sending domain connected to
  it, and a new API key with email:send and email:read. The domain is checked in DNS; with
  --trust-domain a domain DNS cannot show is marked verified by the operator instead (DNS is
  then only asked when RELAY_DNS_SERVERS is set). Without either, the records to publish are
  printed and setup exits ${EXIT_NOT_VERIFIED}.
  Defaults: --email owner@relay.localhost, --workspace Default, --project Default,
  --environment development, --domain example.test; password: --password, RELAY_PASSWORD,
  or generated (and printed) for a new user.`;

export const setupCommand: Command = command(SETUP_USAGE, async (args) => {
  const { values, positionals } = parse(args, {
    json: { type: 'boolean' },
    email: { type: 'string' },
    password: { type: 'string' },
    workspace: { type: 'string' },
    project: { type: 'string' },
    environment: { type: 'string' },
    domain: { type: 'string' },
    activate: { type: 'boolean' },
    'trust-domain': { type: 'boolean' },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const environment = values.environment ?? 'development';
  if (environment !== 'development' && environment !== 'production') throw new UsageError('--environment must be development or production');
  const trustDomain = values['trust-domain'] ?? false;
  const outcome = await withStores('create', async (stores, config) => {
    // The secret key seals the DKIM key of a domain setup creates: setup may make its file.
    const services = await openServices(config, stores);
    try {
      return await runSetup(
        {
          documents: stores.documents,
          config,
          secrets: services.secrets,
          dns: trustDomain && config.dnsServers.length === 0 ? null : services.dns,
          now: () => new Date(),
          log: (line) => err(line),
        },
        {
          email: values.email ?? 'owner@relay.localhost',
          password: values.password ?? process.env.RELAY_PASSWORD,
          workspace: values.workspace ?? 'Default',
          project: values.project ?? 'Default',
          environment: environment as Environment,
          domain: values.domain ?? 'example.test',
          activate: values.activate ?? false,
          trustDomain,
        },
      );
    } finally {
      await services.close();
    }
  });
  if (!outcome.ok) {
    if (values.json) out(outcome);
    err(`relay: ${outcome.message}. Records to publish:`);
    for (const record of outcome.records) {
      err(`  ${record.type.padEnd(3)} ${record.name}  ${record.type === 'MX' ? `${record.priority} ` : ''}${record.value}${record.required ? '' : '  (recommended)'}`);
    }
    // The user exists from now on: its password is told now or never.
    if (outcome.password) err(`generated password for ${outcome.email}: ${outcome.password}`);
    return EXIT_NOT_VERIFIED;
  }
  const { result } = outcome;
  if (values.json) out(result);
  else {
    process.stdout.write(`${result.apiKey}\n`);
    err(`ready: project ${result.projectId} sends from ${result.domain} with key ${result.keyId} (printed on stdout)`);
  }
  if (result.password) err(`generated password for ${result.email}: ${result.password}`);
  return 0;
});
