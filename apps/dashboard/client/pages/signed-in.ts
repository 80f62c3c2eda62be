// Where a sign-in made from another tab leads (a page whose session ended links to it, so that
// the page and what was typed in it stay): it says the session is back and where to go on.
import type { PageContext } from '../context.ts';
import { h, notice } from '../dom.ts';

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Signed in again');
  ctx.main.append(
    notice('success', `You are signed in as ${ctx.session!.user.email}.`),
    h('p', null, 'Close this tab and go back to the tab you were working in: what you typed there is still there. Try again there (press its button again).'),
    h('p', null, h('a', { href: '/' }, 'Or go to the dashboard')));
}
