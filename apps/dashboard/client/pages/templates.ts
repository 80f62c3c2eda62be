// The project's templates, by name, with cursor paging in the address; a new one opens the editor.
import { get, withQuery } from '../api.ts';
import type { PageContext } from '../context.ts';
import { append, h, table, when } from '../dom.ts';

interface TemplateSummary { id: string; name: string; slug: string; subject: string; revision: number; updatedAt: string }

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Templates');
  const projectId = ctx.project!.id;
  const here = `/projects/${projectId}/templates`;
  const cursor = ctx.query.get('cursor');
  const page = await get<{ templates: TemplateSummary[]; next_cursor: string | null }>(withQuery('/v1/templates', { projectId, cursor }));
  append(ctx.main, [
    ctx.can.write ? h('p', null, h('a', { href: `${here}/new`, class: 'button' }, 'New template')) : null,
    table('Templates', ['Name', 'Slug', 'Subject', 'Revision', 'Updated'], page.templates.map((t) => [
      h('a', { href: `${here}/${t.id}` }, t.name), h('code', null, t.slug), t.subject, String(t.revision), when(t.updatedAt),
    ]), 'No templates yet. A template send names one by its slug: {"template": "welcome", "variables": {…}}.'),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      cursor ? h('a', { href: here }, 'First page') : null,
      page.next_cursor ? h('a', { href: withQuery(here, { cursor: page.next_cursor }), rel: 'next' }, 'Next page') : null),
  ]);
}
