// The project's API keys: create one with its permissions (the secret is shown once, with a
// copy button, and never again), and revoke (refused at once from then on). Every live key is on
// the first page with the most recently revoked; older revoked keys page on (the cursor in the address).
import { api, get, withQuery } from '../api.ts';
import type { PageContext } from '../context.ts';
import { actionButton, badge, checkboxes, checkedValues, copyable, field, fill, form, h, maxCharacters, notice, redrawAfterAction, section, table, value, when } from '../dom.ts';

interface ApiKey { id: string; name: string; environment: string; preview: string; permissions: string[]; createdAt: string; revokedAt: string | null }

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('API keys');
  const projectId = ctx.project!.id;
  const here = `/projects/${projectId}/api-keys`;
  const cursor = ctx.query.get('cursor');
  const list = h('div');
  const status = h('div');

  async function load(): Promise<void> {
    const page = await get<{ apiKeys: ApiKey[]; next_cursor: string | null }>(withQuery(`/v1/projects/${projectId}/api-keys`, { cursor }));
    fill(list, table('API keys', ['Name', 'Key', 'Permissions', 'Created', 'State', ''], page.apiKeys.map((key) => [
      key.name,
      h('code', null, `${key.preview}…`),
      key.permissions.join(', '),
      when(key.createdAt),
      key.revokedAt ? [badge('revoked'), ' ', when(key.revokedAt)] : badge('active', 'ok'),
      ctx.can.write && !key.revokedAt
        ? actionButton('Revoke', { class: 'danger small', 'aria-label': `Revoke ${key.name}` }, {
          status, confirm: `Revoke the key "${key.name}"? Requests with it are refused at once.`,
        }, async () => {
          await api('DELETE', `/v1/api-keys/${key.id}`);
          fill(status, notice('success', `Revoked ${key.name}.`));
          await redrawAfterAction(status, load);
        })
        : null,
    ]), cursor ? 'No older revoked key.' : 'No API key yet.'),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      cursor ? h('a', { href: here }, 'Live keys and the latest revoked') : null,
      page.next_cursor ? h('a', { href: withQuery(here, { cursor: page.next_cursor }), rel: 'next' }, 'Older revoked keys') : null));
  }

  ctx.main.append(h('p', { class: 'hint' }, `Keys of this ${ctx.project!.environment} project start with ${ctx.project!.environment === 'production' ? 'rr_live_' : 'rr_test_'}; send with "Authorization: Bearer <key>".`), status, list);
  await load();
  // Later pages hold older revoked keys only: a new key would not show there.
  if (!ctx.can.write || cursor) return;
  const secret = h('div');
  ctx.main.append(section('Create a key', form({ 'aria-label': 'Create a key' }, [
    field('Name', h('input', { name: 'name', required: true, maxlength: maxCharacters(100), placeholder: 'Backend (production)' })),
    checkboxes('Permissions', 'permissions', ctx.settings.permissions, ctx.settings.permissions),
    h('button', { type: 'submit' }, 'Create key'),
  ], async (element) => {
    const permissions = checkedValues(element, 'permissions');
    if (permissions.length === 0) throw new Error('Choose at least one permission.');
    const created = await api<ApiKey & { secret: string }>('POST', `/v1/projects/${projectId}/api-keys`, { name: value(element, 'name'), permissions });
    element.reset();
    // Relay keeps only the key's hash: this answer is the one chance to show the secret.
    fill(secret, h('div', { class: 'secret', role: 'status' },
      h('p', null, h('strong', null, `Your new key "${created.name}". `), 'Copy it now: it is shown this once and Relay keeps only its hash.'),
      copyable('the new API key', created.secret)));
    await redrawAfterAction(secret, load);
  }), secret));
}
