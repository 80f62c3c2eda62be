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

// The syntax the API takes for `after` and `before` (RFC 3339 §5.6, as apps/api/validation.ts
// reads it): a bound of the address in another form is not kept, the field's value replaces it.
const RFC3339_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i;

/**
 * The bound to send for a "Sent after" / "Sent before" field. The field shows the address's
 * bound to the minute, in the reader's zone, and a local time in the hour repeated when daylight
 * saving time ends names two instants: reading it back would move a bound the reader never
 * touched (seconds dropped, or 30–60 minutes earlier). So while the field still shows what the
 * address's bound gave, that bound is sent on exactly as it was; only a field the reader changed
 * is read as the browser's local time.
 */
function boundToSend(original: string | null, shown: string): string {
  if (original && RFC3339_DATE_TIME.test(original) && shown !== '' && shown === toLocalInput(original)) return original;
  return fromLocalInput(shown);
}

/** The reader's zone, named in the time fields' hint (the IANA name, or nothing if the browser gives none). */
function localZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone ?? '';
  } catch {
    return '';
  }
}

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Emails');
  const projectId = ctx.project!.id;
  const here = `/projects/${projectId}/emails`;
  const query = Object.fromEntries(FILTERS.map((name) => [name, ctx.query.get(name)]));
  const cursor = ctx.query.get('cursor');

  // A status the address names but Relay does not know stays chosen, so the reader sees what the refusal is about.
  const statuses = query.status && !ctx.settings.statuses.includes(query.status) ? [...ctx.settings.statuses, query.status] : ctx.settings.statuses;
  const refusal = h('div', { class: 'form-errors' });
  const zone = localZone();
  const timeField = (label: string, name: 'after' | 'before') => {
    const control = h('input', { name, type: 'datetime-local', value: toLocalInput(query[name]) });
    const wrapper = field(label, control, `Your browser's local time${zone ? ` (${zone})` : ''}.`);
    // The hint between the label and the control: the filters' row lines its controls up at the bottom.
    const hint = wrapper.querySelector('.hint');
    if (hint) wrapper.insertBefore(hint, control);
    return wrapper;
  };
  const filters = h('form', { class: 'filters', method: 'get', action: here, 'aria-label': 'Filter emails' },
    field('Status', select('status', [['', 'Any status'], ...statuses.map((s): [string, string] => [s, s])], query.status ?? '')),
    field('Sender', h('input', { name: 'sender', type: 'text', value: query.sender ?? '', placeholder: 'app@example.com' })),
    field('Sender domain', h('input', { name: 'domain', type: 'text', value: query.domain ?? '', placeholder: 'example.com' })),
    field('Recipient', h('input', { name: 'recipient', type: 'text', value: query.recipient ?? '', placeholder: 'someone@example.org' })),
    timeField('Sent after', 'after'),
    timeField('Sent before', 'before'),
    field('Per page', select('limit', [['', '50'], ['10', '10'], ['25', '25'], ['100', '100']], query.limit ?? '')),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Apply filters'), h('a', { href: here, class: 'button secondary' }, 'Clear')),
    refusal);
  // The form would work as a plain GET; the script only turns edited local times into RFC 3339
  // (an untouched time field keeps the address's bound: boundToSend) and drops empty fields.
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(filters);
    const next: Record<string, string> = {};
    for (const name of FILTERS) {
      const raw = String(data.get(name) ?? '');
      next[name] = name === 'after' || name === 'before' ? boundToSend(query[name], raw) : raw.trim();
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
