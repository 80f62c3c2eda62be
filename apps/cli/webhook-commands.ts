// `relay webhooks list <projectId>`: a project's webhook endpoints, for operators.
import { loadConfig } from '../../infra/config.ts';
import { projectsOf } from '../services/management/projects.ts';
import { endpointView, listEndpoints } from '../services/webhooks/endpoints.ts';
import { asksForHelp, EXIT_USAGE, parseOrExplain } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printable, printableJson } from './printable.ts';

const USAGE = 'usage: relay webhooks list <projectId> [--json]   a project\'s webhook endpoints (secrets are never shown)';

export async function webhooks(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  const parsed = parseOrExplain(args, { json: { type: 'boolean' } }, USAGE);
  if (!parsed) return EXIT_USAGE;
  const [verb, projectId, ...rest] = parsed.positionals;
  if (verb !== 'list' || !projectId || !/^[A-Za-z0-9_-]{1,64}$/.test(projectId) || rest.length > 0) {
    console.error(USAGE);
    return EXIT_USAGE;
  }
  const stores = await openExistingStores(loadConfig(), ['documents']);
  if (!stores) return 1;
  try {
    // A mistyped id is said to be one, as other commands say of what they do not find: never an
    // empty list a script would take for a project without endpoints.
    if (!(await projectsOf(stores.documents).get(projectId))) {
      console.error(`relay: no project ${projectId}`);
      return 1;
    }
    const endpoints = (await listEndpoints(stores.documents, projectId)).map(endpointView);
    if (parsed.values.json) console.log(printableJson({ endpoints }));
    else if (endpoints.length === 0) console.error(`(project ${projectId} has no webhook endpoints)`);
    // The URL is the customer's.
    else for (const e of endpoints) console.log(printable(`${e.id}  ${e.enabled ? 'enabled ' : 'disabled'}  ${e.url}  ${e.events.join(',')}`));
    return 0;
  } finally {
    await stores.close();
  }
}
