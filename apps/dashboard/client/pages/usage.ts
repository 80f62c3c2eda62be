// This month's accepted recipients against the monthly allowances: the workspace's, and each
// development key's own.
import { get } from '../api.ts';
import type { PageContext } from '../context.ts';
import { facts, h, section, table, when } from '../dom.ts';

interface Usage {
  month: string; resetsAt: string; recipients: { used: number; limit: number };
  keys: Array<{ apiKeyId: string; name: string; projectId: string | null; environment: string | null; used: number; limit: number | null }>;
}

function meter(label: string, used: number, limit: number): HTMLElement {
  // An allowance of 0 (an operator stopped the workspace's sending) has no share to show.
  if (limit === 0) {
    return h('div', { class: 'usage' }, h('strong', null, label),
      h('span', null, ` No sending is allowed this month (an allowance of 0 recipients).${used > 0 ? ` ${used.toLocaleString()} ${used === 1 ? 'was' : 'were'} accepted earlier this month.` : ''}`));
  }
  const id = `meter-${label.replace(/\W+/g, '-')}`;
  return h('div', { class: 'usage' },
    h('label', { for: id }, label),
    h('meter', { id, min: 0, max: limit, value: Math.min(used, limit), high: limit * 0.9, optimum: 0 }),
    h('span', null, ` ${used.toLocaleString()} of ${limit.toLocaleString()} (${Math.round((used / limit) * 100)} %)`));
}

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Usage');
  const usage = await get<Usage>(`/v1/workspaces/${ctx.workspace!.workspaceId}/usage`);
  const projectName = (id: string | null) => ctx.projects.find((p) => p.id === id)?.name ?? '—';
  ctx.main.append(
    facts([['Month (UTC)', usage.month], ['Allowances reset', when(usage.resetsAt)]]),
    meter('Recipients this month', usage.recipients.used, usage.recipients.limit),
    h('p', { class: 'hint' }, 'Every accepted To, Cc and Bcc recipient counts; a send past the allowance is refused with 429 quota_exceeded.'),
    section('By key', table('Recipients by key', ['Key', 'Project', 'Environment', 'Recipients', 'Own allowance'], usage.keys.map((k) => [
      k.name, projectName(k.projectId), k.environment ?? '—', k.used.toLocaleString(),
      k.limit === null ? '—' : `${k.used.toLocaleString()} of ${k.limit.toLocaleString()}`,
    ]), 'Nothing sent this month.')),
  );
}
