// The project's emails: every filter of GET /v1/emails and its cursor paging, all in the
// address (a filtered view can be linked); the first page refreshes itself while it is open,
// so a send shows up without reloading.
import { ApiError, get, withQuery } from '../api.ts';
import type { PageContext } from '../context.ts';
import { badge, field, fill, h, notice, redrawKeepingFocus, select, table, when } from '../dom.ts';
import { livePoll } from '../live.ts';

interface EmailSummary {
  id: string; fromAddress: string; toAddresses: string[]; subject: string; status: string;
  testMode: boolean; failureCode: string | null; createdAt: string; sentAt: string | null;
}

const FILTERS = ['status', 'sender', 'domain', 'recipient', 'after', 'before', 'limit'] as const;

/** An RFC 3339 instant as a datetime-local value in the reader's zone, and back. */
const toLocalInput = (iso: string | null) => {
  if (!iso || Number.isNaN(Date.parse(iso))) return '';
  const date = new Date(iso);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const fromLocalInput = (local: string) => (local ? new Date(local).toISOString() : '');

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Emails');
  const projectId = ctx.project!.id;
  const here = `/projects/${projectId}/emails`;
  const query = Object.fromEntries(FILTERS.map((name) => [name, ctx.query.get(name)]));
  const cursor = ctx.query.get('cursor');

  // A status the address names but Relay does not know stays chosen, so the reader sees what the refusal is about.
  const statuses = query.status && !ctx.settings.statuses.includes(query.status) ? [...ctx.settings.statuses, query.status] : ctx.settings.statuses;
  const refusal = h('div', { class: 'form-errors' });
  const filters = h('form', { class: 'filters', method: 'get', action: here, 'aria-label': 'Filter emails' },
    field('Status', select('status', [['', 'Any status'], ...statuses.map((s): [string, string] => [s, s])], query.status ?? '')),
    field('Sender', h('input', { name: 'sender', type: 'text', value: query.sender ?? '', placeholder: 'app@example.com' })),
    field('Sender domain', h('input', { name: 'domain', type: 'text', value: query.domain ?? '', placeholder: 'example.com' })),
    field('Recipient', h('input', { name: 'recipient', type: 'text', value: query.recipient ?? '', placeholder: 'someone@example.org' })),
    field('Sent after', h('input', { name: 'after', type: 'datetime-local', value: toLocalInput(query.after) })),
    field('Sent before', h('input', { name: 'before', type: 'datetime-local', value: toLocalInput(query.before) })),
    field('Per page', select('limit', [['', '50'], ['10', '10'], ['25', '25'], ['100', '100']], query.limit ?? '')),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Apply filters'), h('a', { href: here, class: 'button secondary' }, 'Clear')),
    refusal);
  // The form would work as a plain GET; the script only turns local times into RFC 3339 and drops empty fields.
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(filters);
    const next: Record<string, string> = {};
    for (const name of FILTERS) {
      const raw = String(data.get(name) ?? '');
      next[name] = name === 'after' || name === 'before' ? fromLocalInput(raw) : raw.trim();
    }
    location.assign(withQuery(here, next));
  });

  // The table itself is not a live region (each redraw would read it out again): a short
  // status line says that the list changed.
  const results = h('div', { class: 'results' });
  const status = h('p', { class: 'visually-hidden', role: 'status' });
  ctx.main.append(filters, status, results);

  let shown = '';
  async function load(): Promise<void> {
    const page = await get<{ emails: EmailSummary[]; next_cursor: string | null }>(withQuery(`/v1/projects/${projectId}/emails`, { ...query, cursor }));
    // An unchanged answer leaves the table as it is, and with it the reader's place and focus.
    const seen = JSON.stringify(page);
    if (seen === shown) return;
    const first = shown === '';
    shown = seen;
    const rows = page.emails.map((email) => [
      h('a', { href: `${here}/${email.id}` }, email.subject),
      email.toAddresses.join(', '),
      email.fromAddress,
      [badge(email.status), email.testMode ? badge('test', 'muted') : null, email.failureCode ? h('span', { class: 'hint' }, ` ${email.failureCode}`) : null],
      when(email.createdAt),
    ]);
    const filtered = FILTERS.some((name) => name !== 'limit' && query[name]);
    // A real change redraws the table: focus goes back to the same link (or the table) if it is still there.
    redrawKeepingFocus(results, () => fill(results,
      table('Emails', ['Subject', 'To', 'From', 'Status', 'Created'], rows,
        filtered ? 'No email matches these filters.' : 'No emails yet. Send one with an API key of this project (POST /v1/emails).'),
      h('nav', { class: 'pager', 'aria-label': 'Pages' },
        cursor ? h('a', { href: withQuery(here, { ...query }) }, 'Newest') : null,
        page.next_cursor ? h('a', { href: withQuery(here, { ...query, cursor: page.next_cursor }), rel: 'next' }, 'Next page') : null)));
    if (!first) status.textContent = `The list was updated at ${new Date().toLocaleTimeString()}: ${page.emails.length} ${page.emails.length === 1 ? 'email' : 'emails'} on this page.`;
  }
  try {
    await load();
  } catch (error) {
    // A filter Relay refuses (a date that is not one, an unknown status) is the reader's to
    // correct: the form keeps its values and says why, and there is no list to follow.
    if (!(error instanceof ApiError && error.code === 'validation_error')) throw error;
    fill(refusal, notice('error', error.message));
    return;
  }
  // Later pages stay as they are: new emails arrive at the top of the first.
  if (!cursor) livePoll(load);
}
