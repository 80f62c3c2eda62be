// Invitations waiting for the signed-in user's email: accept (join the workspace with the
// role offered) or decline. An invited person signs in and finds them here.
import { api, get } from '../api.ts';
import type { PageContext } from '../context.ts';
import { actionButton, fill, h, notice, redrawAfterAction, table, when } from '../dom.ts';

interface Invitation { id: string; workspaceId: string; workspaceName: string; role: string; expiresAt: string }

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Invitations');
  const list = h('div');
  const status = h('div');
  ctx.main.append(status, list);

  async function load(): Promise<void> {
    const { invitations } = await get<{ invitations: Invitation[] }>('/v1/invitations');
    const none = ctx.session!.memberships.length === 0
      ? 'No invitation is waiting for you. Ask an owner or admin of a workspace to invite your email, or ask your operator.'
      : 'No invitation is waiting for you.';
    fill(list, table('Invitations', ['Workspace', 'Role', 'Expires', 'Answer'], invitations.map((invitation) => [
      invitation.workspaceName,
      invitation.role,
      when(invitation.expiresAt),
      h('div', { class: 'row-actions' },
        actionButton('Accept', { 'aria-label': `Accept the invitation to ${invitation.workspaceName}` }, { status }, async () => {
          await api('POST', `/v1/invitations/${invitation.id}/accept`);
          location.assign(`/workspaces/${invitation.workspaceId}`);
        }),
        actionButton('Decline', { class: 'secondary', 'aria-label': `Decline the invitation to ${invitation.workspaceName}` }, { status }, async () => {
          await api('DELETE', `/v1/invitations/${invitation.id}`);
          fill(status, notice('success', `Declined the invitation to ${invitation.workspaceName}.`));
          await redrawAfterAction(status, load);
        })),
    ]), none));
  }
  await load();
  if (ctx.session!.memberships.length > 0) ctx.main.append(h('p', null, h('a', { href: '/' }, 'Back to the dashboard')));
}
