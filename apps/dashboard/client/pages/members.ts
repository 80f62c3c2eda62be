// The workspace's members and pending invitations: invite an email with a role (the person
// accepts after signing in), revoke an invitation, change a role, remove a member, or leave.
import { api, get } from '../api.ts';
import type { PageContext, Role } from '../context.ts';
import { actionButton, field, fill, form, h, keyed, notice, redrawAfterAction, section, select, table, value, when } from '../dom.ts';

interface Member { userId: string; email: string; role: Role; createdAt: string }
interface Invitation { id: string; email: string; role: Role; createdAt: string; expiresAt: string }

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Members');
  const workspaceId = ctx.workspace!.workspaceId;
  const me = ctx.session!.user.id;
  const grants = ctx.can.grants;
  const status = h('div');
  const body = h('div');

  async function act(run: () => Promise<string>): Promise<void> {
    let done: string;
    try {
      done = await run();
    } catch (error) {
      // Drawn again from what Relay has, so that nothing shows a change it refused (a role picked in a select).
      await load().catch(() => undefined);
      throw error;
    }
    fill(status, notice('success', done));
    await redrawAfterAction(status, load);
  }

  /**
   * A member's role: chosen in the select, changed by the button. The select does nothing by
   * itself: in Chromium an arrow key on a closed select changes it (and fires "change") at once,
   * so a reader looking through the roles would give the first one passed.
   */
  function roleChange(m: Member): HTMLElement {
    const role = select('role', grants.map((r): [string, string] => [r, r]), m.role, { 'aria-label': `Role of ${m.email}` });
    const change = actionButton('Change role', { class: 'secondary small', 'aria-label': `Change role for ${m.email}`, 'data-key': `role-${m.userId}` }, {
      status,
      // Asked for owner alone: an owner can do everything, to other owners too.
      confirm: () => (role.value === 'owner' && m.role !== 'owner'
        ? `Make ${m.email} an owner? Owners can do everything in the workspace, including changing the roles of other owners and removing them.`
        : null),
      cancelled: () => {
        role.value = m.role;
      },
      // The same member's button, drawn again with the list (gone if the reader may no longer change that role: then the notice).
      focusAfter: () => keyed(body, `role-${m.userId}`),
    }, async () => {
      const chosen = role.value;
      if (chosen === m.role) {
        fill(status, notice('info', `${m.email} is already ${m.role}: choose another role first.`));
        return;
      }
      await act(async () => {
        try {
          await api('PATCH', `/v1/workspaces/${workspaceId}/members/${m.userId}`, { role: chosen });
        } catch (error) {
          // The role last read, should the list not be read again either.
          role.value = m.role;
          throw error;
        }
        return `${m.email} is now ${chosen}.`;
      });
    });
    return h('div', { class: 'row-actions' }, role, change);
  }

  async function load(): Promise<void> {
    const workspace = await get<{ members: Member[]; invitations: Invitation[] }>(`/v1/workspaces/${workspaceId}`);
    const manageable = (m: Member) => m.userId !== me && grants.includes(m.role);
    fill(body,
      table('Members', ['Email', 'Role', 'Member since', ''], workspace.members.map((m) => [
        m.userId === me ? [m.email, h('span', { class: 'hint' }, ' (you)')] : m.email,
        manageable(m) ? roleChange(m) : m.role,
        when(m.createdAt),
        manageable(m)
          ? actionButton('Remove', { class: 'danger small', 'aria-label': `Remove ${m.email}` }, { status, confirm: `Remove ${m.email} from the workspace?` },
            () => act(async () => {
              await api('DELETE', `/v1/workspaces/${workspaceId}/members/${m.userId}`);
              return `Removed ${m.email}.`;
            }))
          : m.userId === me
            ? actionButton('Leave', { class: 'secondary small' }, { status, confirm: 'Leave this workspace? You will need a new invitation to come back.' }, async () => {
              await api('DELETE', `/v1/workspaces/${workspaceId}/members/${me}`);
              location.assign('/');
            })
            : null,
      ])),
      section('Pending invitations', table('Pending invitations', ['Email', 'Role', 'Invited', 'Expires', ''], workspace.invitations.map((i) => [
        i.email, i.role, when(i.createdAt), when(i.expiresAt),
        grants.length > 0 ? actionButton('Revoke', { class: 'danger small', 'aria-label': `Revoke the invitation of ${i.email}` }, { status },
          () => act(async () => {
            await api('DELETE', `/v1/invitations/${i.id}`);
            return `Revoked the invitation of ${i.email}.`;
          })) : null,
      ]), 'No invitation is pending.')));
  }

  ctx.main.append(status, body);
  await load();
  if (grants.length === 0) return;
  ctx.main.append(section('Invite someone', form({ 'aria-label': 'Invite someone' }, [
    field('Email', h('input', { name: 'email', type: 'email', required: true, maxlength: 254 })),
    field('Role', select('role', grants.map((r): [string, string] => [r, r]), grants.includes('developer') ? 'developer' : grants[0]),
      'Viewers read; developers also change projects, domains, keys, templates and webhooks; admins also manage members and suppressions.'),
    h('button', { type: 'submit' }, 'Invite'),
  ], async (element) => {
    const email = value(element, 'email');
    await api('POST', `/v1/workspaces/${workspaceId}/members`, { email, role: value(element, 'role') });
    element.reset();
    fill(status, notice('success', `Invited ${email}. Once they sign in to Relay with that email, they accept it on their Invitations page (${location.origin}/invitations).`));
    await redrawAfterAction(status, load);
  })));
}
