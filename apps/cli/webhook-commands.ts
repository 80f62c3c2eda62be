// `relay webhooks list <projectId>`: a project's webhook endpoints, for operators.
import { loadConfig } from '../../infra/config.ts';
import { endpointView, listEndpoints } from '../services/webhooks/endpoints.ts';
import { asksForHelp } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printable, printableJson } from './printable.ts';

const USAGE = 'usage: relay webhooks list <projectId> [--json]   a project\'s webhook endpoints (secrets are never shown)';

export async function webhooks(args: string[]): Promise<number> {
  const [verb, projectId, ...rest] = args;
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  const json = rest.length === 1 && rest[0] === '--json';
  if (verb !== 'list' || !projectId || !/^[A-Za-z0-9_-]{1,64}$/.test(projectId) || (rest.length > 0 && !json)) {
    console.error(USAGE);
    return 2;
  }
  const stores = await openExistingStores(loadConfig(), ['documents']);
  if (!stores) return 1;
  try {
    const endpoints = (await listEndpoints(stores.documents, projectId)).map(endpointView);
    if (json) console.log(printableJson({ endpoints }));
    else if (endpoints.length === 0) console.error(`(project ${projectId} has no webhook endpoints)`);
    // The URL is the customer's.
    else for (const e of endpoints) console.log(printable(`${e.id}  ${e.enabled ? 'enabled ' : 'disabled'}  ${e.url}  ${e.events.join(',')}`));
    return 0;
  } finally {
    await stores.close();
  }
}
