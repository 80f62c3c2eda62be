// The workspace's sending domains with their status; adding one makes its DKIM key and the
// records to publish (the domain's page shows them with copy buttons and verifies them).
import { api, get } from '../api.ts';
import type { PageContext } from '../context.ts';
import { badge, field, form, h, section, table, value, when } from '../dom.ts';

export interface Domain {
  id: string; name: string; status: string; dkimSelector: string; mailFromDomain: string;
  dkimRotation: { selector: string; record: { name: string; value: string } | null; startedAt: string; check: { status: string; message: string } | null; checkedAt: string | null } | null;
  retiredDkimKeys: Array<{ selector: string; recordName: string; retiredAt: string }>;
  records: Array<{ purpose: string; type: string; name: string; value: string; priority?: number; required: boolean; txtStrings?: string[] }>;
  checks: Array<{ purpose: string; name: string; type: string; required: boolean; status: string; expected: string; found: string[]; message: string }> | null;
  lastCheckedAt: string | null; verifiedAt: string | null; verifiedBy: string | null; operatorNote: string | null; projectIds: string[]; createdAt: string;
}

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Domains');
  const workspaceId = ctx.workspace!.workspaceId;
  const { domains } = await get<{ domains: Domain[] }>(`/v1/workspaces/${workspaceId}/domains`);
  const projectName = (id: string) => ctx.projects.find((p) => p.id === id)?.name ?? id;
  ctx.main.append(table('Domains', ['Domain', 'Status', 'Projects', 'Last checked'], domains.map((d) => [
    h('a', { href: `/workspaces/${workspaceId}/domains/${d.id}` }, d.name),
    badge(d.status),
    d.projectIds.length ? d.projectIds.map(projectName).join(', ') : '—',
    when(d.lastCheckedAt),
  ]), 'No sending domain yet. Add the domain your emails come from.'));
  if (!ctx.can.write) return;
  ctx.main.append(section('Add a domain', form({ 'aria-label': 'Add a domain' }, [
    field('Domain name', h('input', { name: 'name', required: true, maxlength: 253, placeholder: 'mail.example.com' })),
    h('button', { type: 'submit' }, 'Add domain'),
  ], async (element) => {
    const domain = await api<Domain>('POST', `/v1/workspaces/${workspaceId}/domains`, { name: value(element, 'name') });
    location.assign(`/workspaces/${workspaceId}/domains/${domain.id}`);
  })));
}
