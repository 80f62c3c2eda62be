// The project's webhook endpoints; creating one shows its signing secret once.
import { api, get } from '../api.ts';
import type { PageContext } from '../context.ts';
import { badge, checkboxes, checkedValues, copyable, field, fill, form, h, maxCharacters, redrawAfterAction, section, table, value } from '../dom.ts';

export interface Endpoint { id: string; projectId: string; url: string; events: string[]; description: string | null; enabled: boolean; createdAt: string; updatedAt: string }

/** Shown once after creation or rotation: Relay keeps the secret sealed and never shows it again. */
export function secretPanel(what: string, secret: string): HTMLElement {
  return h('div', { class: 'secret', role: 'status' },
    h('p', null, h('strong', null, `${what}. `), 'Copy the signing secret now: it is shown this once. Your receiver checks each request\'s signature with it.'),
    copyable('the signing secret', secret));
}

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Webhooks');
  const projectId = ctx.project!.id;
  const here = `/projects/${projectId}/webhooks`;
  const list = h('div');
  async function load(): Promise<void> {
    const { endpoints } = await get<{ endpoints: Endpoint[] }>(`/v1/projects/${projectId}/webhook-endpoints`);
    fill(list, table('Webhook endpoints', ['URL', 'Events', 'State', 'Description'], endpoints.map((e) => [
      h('a', { href: `${here}/${e.id}` }, e.url), e.events.join(', '), e.enabled ? badge('enabled') : badge('disabled'), e.description ?? '',
    ]), 'No endpoint yet. Relay posts signed events about this project\'s emails to each endpoint.'));
  }
  ctx.main.append(list);
  await load();
  if (!ctx.can.write) return;
  const secret = h('div');
  ctx.main.append(section('Add an endpoint', form({ 'aria-label': 'Add an endpoint' }, [
    field('URL', h('input', { name: 'url', type: 'url', required: true, maxlength: 2048, placeholder: 'https://example.com/relay-webhooks' }),
      'https on port 443, a host name that resolves to public addresses.'),
    checkboxes('Events', 'events', ctx.settings.webhookEvents, ctx.settings.webhookEvents),
    field('Description', h('input', { name: 'description', maxlength: maxCharacters(500) })),
    h('button', { type: 'submit' }, 'Add endpoint'),
  ], async (element) => {
    const events = checkedValues(element, 'events');
    if (events.length === 0) throw new Error('Choose at least one event.');
    const description = value(element, 'description').trim();
    const created = await api<Endpoint & { secret: string }>('POST', `/v1/projects/${projectId}/webhook-endpoints`, {
      url: value(element, 'url'), events, ...(description ? { description } : {}),
    });
    element.reset();
    // Relay never shows the secret again: this answer is the one chance.
    fill(secret, secretPanel(`Endpoint ${created.url} added`, created.secret), h('p', null, h('a', { href: `${here}/${created.id}` }, 'Open the endpoint')));
    await redrawAfterAction(secret, load);
  }), secret));
}
