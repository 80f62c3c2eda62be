// One webhook endpoint: edit its URL, events and description, enable or disable it, rotate its
// signing secret (the new one shown once), delete it; and its recent deliveries with every
// attempt and the receiver's status codes (cursor paging in the address).
import { api, get, withQuery } from '../api.ts';
import type { PageContext } from '../context.ts';
import { actionButton, badge, checkboxes, checkedValues, facts, field, fill, form, h, keyed, maxCharacters, notice, redrawKeepingFocus, section, table, value, when } from '../dom.ts';
import { livePoll } from '../live.ts';
import { attemptsTable } from './email.ts';
import { secretPanel, type Endpoint } from './webhooks.ts';

interface Delivery {
  id: string; emailId: string; eventId: string; type: string; status: string; attempts: number; nextAttemptAt: string | null;
  attemptLogs: Array<{ number: number; httpStatus: number | null; errorCode: string | null; durationMs: number; createdAt: string }>;
  createdAt: string; updatedAt: string;
}

/** What moved in the list since it was last drawn, in a few words: "Deliveries: 1 new, 2 updated." */
function changeOf(before: Delivery[], after: Delivery[]): string {
  const known = new Map(before.map((d) => [d.id, JSON.stringify(d)]));
  const added = after.filter((d) => !known.has(d.id)).length;
  const updated = after.filter((d) => known.has(d.id) && known.get(d.id) !== JSON.stringify(d)).length;
  const parts = [added > 0 ? `${added} new` : null, updated > 0 ? `${updated} updated` : null].filter(Boolean);
  return parts.length > 0 ? `Deliveries: ${parts.join(', ')}.` : 'The deliveries were updated.';
}

export async function render(ctx: PageContext): Promise<void> {
  const projectId = ctx.project!.id;
  const list = `/projects/${projectId}/webhooks`;
  const path = `/v1/webhook-endpoints/${ctx.params.endpointId}`;
  const cursor = ctx.query.get('cursor');
  let endpoint = await get<Endpoint>(path);
  const status = h('div');
  // Not in `status`, which the next action's outcome ("Saved.") replaces: the secret is shown only
  // this once, and stays until the page is left or the secret rotated again.
  const rotated = h('div');
  const summary = h('div');
  // Not a live region (each redraw would read the whole list out again): a short status line says what changed.
  const deliveries = h('div');
  const deliveriesStatus = h('p', { class: 'visually-hidden', role: 'status' });

  function drawSummary(): void {
    ctx.title(endpoint.url);
    fill(summary, facts([
      ['State', [endpoint.enabled ? badge('enabled') : badge('disabled'), ' ',
        ctx.can.write
          ? actionButton(endpoint.enabled ? 'Disable' : 'Enable', { class: 'secondary small', 'data-key': 'toggle' }, { status, focusAfter: () => keyed(summary, 'toggle') }, toggle)
          : null]],
      ['Events', endpoint.events.join(', ')],
      ['Created', when(endpoint.createdAt)],
      ['Updated', when(endpoint.updatedAt)],
    ]));
  }

  async function toggle(): Promise<void> {
    endpoint = await api<Endpoint>('PATCH', path, { enabled: !endpoint.enabled });
    fill(status, notice('success', endpoint.enabled ? 'Enabled: new events are delivered again.' : 'Disabled: pending deliveries end, and no new ones are made.'));
    drawSummary();
  }
  async function rotate(): Promise<void> {
    const { secret } = await api<{ secret: string }>('POST', `${path}/rotate-secret`);
    fill(rotated, secretPanel('New signing secret', secret));
  }
  async function remove(): Promise<void> {
    await api('DELETE', path);
    location.assign(list);
  }

  let shown = '';
  let drawn: Delivery[] | null = null;
  async function loadDeliveries(): Promise<void> {
    const page = await get<{ deliveries: Delivery[]; next_cursor: string | null }>(withQuery(`${path}/deliveries`, { cursor, limit: 20 }));
    const seen = JSON.stringify(page);
    if (seen === shown) return;
    shown = seen;
    // Attempt logs the reader opened stay open when the list is drawn again (a delivery's summary keyed by its id).
    const open = [...deliveries.querySelectorAll<HTMLElement>('details[open] summary')].map((s) => s.dataset.key);
    redrawKeepingFocus(deliveries, () => fill(deliveries,
      table('Recent deliveries', ['Email', 'Event', 'Status', 'Attempts', 'Last answer', 'Created'], page.deliveries.map((d) => {
        const last = d.attemptLogs[d.attemptLogs.length - 1];
        return [
          // Keyed by the delivery: an email has a delivery per event, all linking to it.
          h('a', { href: `/projects/${projectId}/emails/${d.emailId}`, 'data-key': `email-${d.id}` }, d.emailId),
          d.type,
          [badge(d.status), d.nextAttemptAt ? h('p', { class: 'hint' }, 'next ', when(d.nextAttemptAt)) : null],
          String(d.attempts),
          last ? (last.httpStatus !== null ? `HTTP ${last.httpStatus}` : last.errorCode ?? '—') : '—',
          when(d.createdAt),
        ];
      }), 'No delivery yet: events of this project\'s emails appear here as they are sent.'),
      page.deliveries.filter((d) => d.attemptLogs.length > 0).map((d) => h('details', { class: 'attempts', open: open.includes(`attempts-${d.id}`) },
        h('summary', { 'data-key': `attempts-${d.id}` }, `Attempts of ${d.type} for ${d.emailId} (${d.attemptLogs.length})`),
        attemptsTable(`Attempts of delivery ${d.id}`, d.attemptLogs))),
      h('nav', { class: 'pager', 'aria-label': 'Pages' },
        cursor ? h('a', { href: `${list}/${endpoint.id}` }, 'Newest') : null,
        page.next_cursor ? h('a', { href: withQuery(`${list}/${endpoint.id}`, { cursor: page.next_cursor }), rel: 'next' }, 'Older deliveries') : null)));
    if (drawn !== null) deliveriesStatus.textContent = changeOf(drawn, page.deliveries);
    drawn = page.deliveries;
  }

  drawSummary();
  ctx.main.append(h('p', null, h('a', { href: list }, '← All endpoints')), status, rotated, summary);
  if (ctx.can.write) {
    const url = h('input', { name: 'url', type: 'url', required: true, maxlength: 2048, value: endpoint.url });
    ctx.main.append(section('Settings', form({ 'aria-label': 'Endpoint settings' }, [
      field('URL', url),
      checkboxes('Events', 'events', ctx.settings.webhookEvents, endpoint.events),
      field('Description', h('input', { name: 'description', maxlength: maxCharacters(500), value: endpoint.description ?? '' })),
      h('div', { class: 'actions' },
        h('button', { type: 'submit' }, 'Save changes'),
        actionButton('Rotate secret', { class: 'secondary' }, { status, confirm: 'Rotate the signing secret? The old one stops signing at once.' }, rotate),
        actionButton('Delete endpoint', { class: 'danger' }, { status, confirm: () => `Delete the endpoint ${endpoint.url}? Its pending deliveries end.` }, remove)),
    ], async (element) => {
      const events = checkedValues(element, 'events');
      if (events.length === 0) throw new Error('Choose at least one event.');
      const description = value(element, 'description').trim();
      // A URL sent is checked again (it must resolve publicly now): sent only when changed, so the
      // events and the description can be edited while its host does not resolve.
      const changed = url.value !== endpoint.url ? { url: url.value } : {};
      endpoint = await api<Endpoint>('PATCH', path, { ...changed, events, description: description || null });
      // As stored (normalized), so that saving again without a change does not send it.
      url.value = endpoint.url;
      fill(status, notice('success', 'Saved.'));
      drawSummary();
    })));
  }
  ctx.main.append(section('Recent deliveries', deliveriesStatus, deliveries));
  await loadDeliveries();
  // The newest page follows deliveries as they are attempted.
  if (!cursor) livePoll(loadDeliveries);
}
