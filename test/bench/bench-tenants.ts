// Sending tenants for benchmarks: activated workspaces with a production project, a verified
// and connected domain, and production keys, made through the real management services inside
// a running Relay, or next to Relay processes on their stores and secret key (so DKIM keys are
// sealed with that secret).
import type { RunningRelay } from '../../apps/relay.ts';
import { createApiKey } from '../../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../../apps/services/management/domains.ts';
import { createProject } from '../../apps/services/management/projects.ts';
import { createWorkspace, setWorkspaceActivation, setWorkspaceAllowances } from '../../apps/services/management/workspaces.ts';
import { MAX_ALLOWANCE } from '../../domain/usage/quota.ts';
import type { Permission } from '../../domain/management.ts';

export interface BenchTenants {
  /** `keysPerWorkspace` keys per workspace, in workspace order. */
  keys: string[];
  /** The sending domain of each key. */
  domains: string[];
}

export async function benchTenants(
  relay: Pick<RunningRelay, 'stores' | 'services'>,
  options: { workspaces: number; keysPerWorkspace: number; domainOf: (w: number) => string; permissions?: Permission[] },
): Promise<BenchTenants> {
  const documents = relay.stores.documents;
  const keys: string[] = [];
  const domains: string[] = [];
  for (let w = 0; w < options.workspaces; w++) {
    const now = new Date();
    const owner = { _id: `usr_bench_${w}`, email: `bench${w}@bench.test`, passwordHash: 'x', createdAt: now.toISOString() };
    const { workspace } = await createWorkspace(documents, owner, `Bench ${w}`, now);
    await setWorkspaceActivation(documents, workspace._id, true, now);
    // As an operator grants a high-volume tenant (`relay workspace quota`): the default 5,000
    // recipients a month would end a long run with 429s instead of measuring it.
    await setWorkspaceAllowances(documents, workspace._id, { workspaceRecipients: MAX_ALLOWANCE });
    const project = await createProject(documents, { workspaceId: workspace._id, name: 'bench', environment: 'production' }, now);
    const domain = await createDomain(documents, { workspaceId: workspace._id, name: options.domainOf(w) }, now, relay.services.secrets);
    await markDomainVerified(documents, domain._id, 'benchmark fixture', now);
    await connectDomain(documents, domain._id, project._id);
    for (let k = 0; k < options.keysPerWorkspace; k++) {
      keys.push((await createApiKey(documents, { project, name: `bench ${k}`, permissions: options.permissions ?? ['email:send'] }, now)).secret);
      domains.push(domain.name);
    }
  }
  return { keys, domains };
}
