// One sending domain: the DNS records to publish (each with a copy button), "verify" with the
// result of each record, its DKIM key's rotation, and the projects of the workspace it is
// connected to.
import { api, get } from '../api.ts';
import type { PageContext } from '../context.ts';
import { actionButton, badge, copyable, facts, fill, h, keyed, notice, section, table, when } from '../dom.ts';
import type { Domain } from './domains.ts';

const PURPOSE: Record<string, string> = { dkim: 'DKIM signature key', mail_from_mx: 'Bounces (MAIL FROM MX)', mail_from_spf: 'SPF of MAIL FROM', dmarc: 'DMARC policy' };

export async function render(ctx: PageContext): Promise<void> {
  const workspaceId = ctx.workspace!.workspaceId;
  const path = `/v1/domains/${ctx.params.domainId}`;
  const body = h('div');
  const status = h('div');
  ctx.main.append(h('p', null, h('a', { href: `/workspaces/${workspaceId}/domains` }, '← All domains')), status, body);

  function draw(domain: Domain): void {
    ctx.title(domain.name);
    const checkOf = (purpose: string) => domain.checks?.find((c) => c.purpose === purpose);
    fill(body,
      facts([
        ['Status', badge(domain.status)],
        ['Verified', domain.verifiedAt ? [when(domain.verifiedAt), domain.verifiedBy === 'operator' ? ` by the operator (${domain.operatorNote ?? ''})` : ' through DNS'] : '—'],
        ['Last checked', when(domain.lastCheckedAt)],
        ['MAIL FROM domain', domain.mailFromDomain],
      ]),
      section('Records to publish',
        h('p', { class: 'hint' }, 'Publish these at your DNS provider, then verify. DMARC is recommended, not required.'),
        table('Records to publish', ['Purpose', 'Type', 'Name', 'Value', 'Last check'], domain.records.map((r) => {
          const check = checkOf(r.purpose);
          return [
            [PURPOSE[r.purpose] ?? r.purpose, r.required ? null : h('span', { class: 'hint' }, ' (recommended)')],
            r.type,
            copyable(`${r.purpose} record name`, r.name),
            copyable(`${r.purpose} record value`, r.type === 'MX' ? `${r.priority ?? 10} ${r.value}` : r.value),
            check ? [badge(check.status), h('p', { class: 'hint' }, check.message)] : '—',
          ];
        }))),
      ctx.can.write ? h('p', null, actionButton('Verify DNS records', {}, { status }, () => verify(domain))) : null,
      dkimKey(domain),
      section('Projects', ctx.projects.length === 0 ? h('p', { class: 'empty' }, 'The workspace has no project.')
        : table('Projects connected', ['Project', 'Connected', ''], ctx.projects.map((p) => {
          const connected = domain.projectIds.includes(p.id);
          return [p.name, connected ? 'yes' : 'no', ctx.can.write
            ? actionButton(connected ? 'Disconnect' : 'Connect', {
              class: 'secondary small', disabled: !connected && domain.status !== 'verified', 'aria-label': `${connected ? 'Disconnect' : 'Connect'} ${p.name}`,
              'data-key': `connect-${p.id}`,
            }, {
              status,
              // The project's button drawn again (now the other way), to go on down the list.
              focusAfter: () => keyed(body, `connect-${p.id}`),
              confirm: connected
                ? `Disconnect ${p.name} from ${domain.name}? From now on every send of ${p.name} from ${domain.name} is refused, until it is connected again.`
                : undefined,
            }, () => connect(p.id, !connected))
            : null];
        }))),
    );
  }

  /** The key signing now, a rotation's new record to publish (a verify or the re-check completes it), and the retired selectors. */
  function dkimKey(domain: Domain): HTMLElement {
    const rotation = domain.dkimRotation;
    const retired = domain.retiredDkimKeys.length === 0 ? null : h('p', { class: 'hint' },
      `Retired: ${domain.retiredDkimKeys.map((k) => k.recordName).join(', ')}. Keep a retired record published a few days after its rotation, for mail signed before it; then remove it.`);
    const button = (label: string, confirm: string | undefined, act: () => Promise<void>) =>
      (ctx.can.write ? h('p', null, actionButton(label, { class: 'secondary' }, { status, confirm }, act)) : null);
    if (!rotation) {
      return section('DKIM key', h('p', null, `Mail is signed with selector ${domain.dkimSelector}.`), retired, button('Rotate DKIM key', undefined, () => rotate('POST')));
    }
    return section('DKIM key',
      h('p', null, `Mail is signed with selector ${domain.dkimSelector} until the new key's record is found: publish it beside the current one. Relay looks for it every few minutes and switches by itself; “Verify DNS records” looks now.`),
      table('New DKIM key', ['Type', 'Name', 'Value', 'Last check'], rotation.record ? [[
        'TXT',
        copyable('new dkim record name', rotation.record.name),
        copyable('new dkim record value', rotation.record.value),
        rotation.check ? [badge(rotation.check.status), h('p', { class: 'hint' }, rotation.check.message)] : '—',
      ]] : []),
      retired,
      button('Cancel rotation',
        `Cancel the DKIM key rotation of ${domain.name}? The new key (selector ${rotation.selector}) is discarded: a record you published for it is of no use any more, and a later rotation makes another. Mail stays signed with selector ${domain.dkimSelector}.`,
        () => rotate('DELETE')));
  }

  async function rotate(method: 'POST' | 'DELETE'): Promise<void> {
    draw(await api<Domain>(method, `${path}/dkim-rotation`));
    fill(status, notice('success', method === 'POST' ? 'New DKIM key made: publish its record. Relay looks for it every few minutes and switches to the new key once it is there; “Verify DNS records” looks now.' : 'Rotation cancelled.'));
  }

  /** What a verify found: the required records, and a pending rotation's new key (completed, or its record still not found). */
  async function verify(before: Domain): Promise<void> {
    fill(status, notice('info', 'Asking DNS…'));
    const domain = await api<Domain>('POST', `${path}/verify`);
    const failing = (domain.checks ?? []).filter((c) => c.required && c.status !== 'ok');
    const records = failing.length === 0
      ? `Verified: every required record of ${domain.name} is published.`
      : `Not verified yet: ${failing.length} required record${failing.length === 1 ? ' is' : 's are'} not as expected.`;
    const pending = domain.dkimRotation;
    const completed = before.dkimRotation !== null && pending === null && domain.dkimSelector === before.dkimRotation.selector;
    fill(status,
      pending
        // The rotation first: it is what a verify during one is for, and the domain's own records may all be fine.
        ? notice('warning', `The new DKIM key's record was not found${pending.check ? ` (${pending.check.message})` : ''}: mail is still signed with selector ${domain.dkimSelector}. Publish the new record, then verify again.`,
          h('p', null, records))
        : notice(failing.length === 0 ? 'success' : 'warning', records,
          completed ? h('p', null, `The new DKIM key is active: mail is now signed with selector ${domain.dkimSelector}.`) : null));
    draw(domain);
  }

  async function connect(projectId: string, on: boolean): Promise<void> {
    draw(await api<Domain>(on ? 'POST' : 'DELETE', `${path}/projects/${projectId}`));
    fill(status, notice('success', on ? 'Connected.' : 'Disconnected.'));
  }

  draw(await get<Domain>(path));
}
