// The workspace's suppression list: why each address is on it (reason, the email whose bounce or
// complaint put it there, when), search by the beginning of an address, add, remove, export as
// CSV. Search and paging live in the address.
import { api, get, withQuery } from '../api.ts';
import type { PageContext } from '../context.ts';
import { actionButton, badge, field, fill, form, h, notice, redrawAfterAction, section, table, value, when } from '../dom.ts';

interface Suppression { address: string; reason: string; emailId: string | null; createdAt: string }

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Suppressions');
  const workspaceId = ctx.workspace!.workspaceId;
  const here = `/workspaces/${workspaceId}/suppressions`;
  const prefix = ctx.query.get('prefix');
  const cursor = ctx.query.get('cursor');
  const status = h('div');
  const list = h('div');

  async function load(): Promise<void> {
    const page = await get<{ suppressions: Suppression[]; next_cursor: string | null }>(withQuery(`/v1/workspaces/${workspaceId}/suppressions`, { prefix, cursor }));
    fill(list,
      table('Suppressed addresses', ['Address', 'Reason', 'Source email', 'Since', ...(ctx.can.suppressions ? [''] : [])], page.suppressions.map((s) => [
        s.address,
        badge(s.reason),
        s.emailId ? h('code', null, s.emailId) : '—',
        when(s.createdAt),
        ...(ctx.can.suppressions ? [actionButton('Remove', { class: 'danger small', 'aria-label': `Remove ${s.address}` }, {
          status, confirm: `Remove ${s.address} from the suppression list? Emails to it will be sent again.`,
        }, async () => {
          await api('DELETE', `/v1/workspaces/${workspaceId}/suppressions/${encodeURIComponent(s.address)}`);
          fill(status, notice('success', `Removed ${s.address}.`));
          await redrawAfterAction(status, load);
        })] : []),
      ]), prefix ? `No suppressed address begins with "${prefix}".` : 'No address is suppressed. Hard bounces and complaints add addresses here by themselves.'),
      h('nav', { class: 'pager', 'aria-label': 'Pages' },
        cursor ? h('a', { href: withQuery(here, { prefix }) }, 'First page') : null,
        page.next_cursor ? h('a', { href: withQuery(here, { prefix, cursor: page.next_cursor }), rel: 'next' }, 'Next page') : null));
  }

  const search = h('form', { method: 'get', action: here, class: 'actions', role: 'search', 'aria-label': 'Search suppressions' },
    field('Address begins with', h('input', { name: 'prefix', type: 'search', value: prefix ?? '', placeholder: 'bob@ or bob@example.com', maxlength: 254 })),
    h('button', { type: 'submit' }, 'Search'),
    prefix ? h('a', { href: here, class: 'button secondary' }, 'Show all') : null,
    h('a', { href: `/v1/workspaces/${workspaceId}/suppressions/export`, class: 'button secondary', download: 'suppressions.csv' }, 'Export CSV'));
  ctx.main.append(h('p', { class: 'hint' }, 'One list for every project of the workspace: Relay sends nothing to these addresses.'), search, status, list);
  await load();
  if (!ctx.can.suppressions) return;
  ctx.main.append(section('Add an address', form({ 'aria-label': 'Add an address' }, [
    field('Address', h('input', { name: 'address', type: 'email', required: true, maxlength: 254 })),
    h('button', { type: 'submit' }, 'Suppress'),
  ], async (element) => {
    const added = await api<Suppression>('POST', `/v1/workspaces/${workspaceId}/suppressions`, { address: value(element, 'address') });
    element.reset();
    fill(status, notice('success', `Suppressed ${added.address}.`));
    await redrawAfterAction(status, load);
  })));
}
