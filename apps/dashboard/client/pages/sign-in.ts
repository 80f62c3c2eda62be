// Sign in with the email and password the operator gave (relay setup, relay user create).
// Too many attempts answer 429 with Retry-After: the page shows the wait and counts it down,
// with the button held until then; it is not an error of the reader's.
import { ApiError, api } from '../api.ts';
import type { PageContext } from '../context.ts';
import { field, fill, form, h, maxCharacters, refocus, value } from '../dom.ts';

/**
 * Only a path of this dashboard: `next` comes from the address and must not lead elsewhere. The
 * browser's URL parser judges it, as it will read it: a pattern over the text misses what the
 * parser drops ("/\t/evil.example" is "//evil.example" to it).
 */
function safeNext(next: string | null): string {
  if (!next) return '/';
  try {
    const url = new URL(next, location.origin);
    // The whole URL, not its path: a path can itself read as another host ("/.//evil.example"
    // resolves to the path "//evil.example", which location.assign takes as scheme-relative).
    return url.origin === location.origin ? url.href : '/';
  } catch {
    return '/';
  }
}

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Sign in to Relay');
  const wait = h('div', { class: 'wait-slot' });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  let timer: number | undefined;

  /**
   * Holds the button for the wait. Said twice, not every second: the status line tells the wait
   * when it starts (Relay's message gives its length) and says when it is over; the count shown
   * meanwhile is a timer outside that live region (aria-live off), since a screen reader reads out
   * every change of a live region, and a wait lasts up to 15 minutes.
   */
  function holdFor(seconds: number, message: string): void {
    clearInterval(timer);
    const until = Date.now() + seconds * 1000;
    const said = h('div', { role: 'status' }, h('strong', null, 'Too many sign-in attempts. '), message);
    const count = h('p', { role: 'timer', 'aria-live': 'off' });
    const tick = () => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      submit.disabled = left > 0;
      if (left > 0) {
        count.textContent = `Try again in ${left} second${left === 1 ? '' : 's'}.`;
        return;
      }
      clearInterval(timer);
      count.remove();
      said.append(h('p', null, 'You can try again now.'));
    };
    const shown = h('div', { class: 'notice notice-warning' }, said, count);
    tick();
    fill(wait, shown);
    // The button pressed is held (disabled), which takes focus away: the wait is where the reader is now.
    refocus(shown);
    timer = window.setInterval(tick, 1000);
  }

  const signIn = form({ 'aria-label': 'Sign in', class: 'narrow' }, [
    field('Email', h('input', { name: 'email', type: 'email', autocomplete: 'username', required: true, maxlength: 254 })),
    field('Password', h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true, maxlength: maxCharacters(1024) })),
    wait,
    submit,
  ], async (element) => {
    fill(wait);
    try {
      await api('POST', '/v1/session', { email: value(element, 'email'), password: value(element, 'password') });
    } catch (error) {
      if (error instanceof ApiError && error.status === 429) {
        holdFor(error.retryAfter ?? 60, error.message);
        return;
      }
      if (error instanceof ApiError && error.code === 'invalid_credentials') throw new Error('That email and password do not match an account.');
      throw error;
    }
    location.assign(safeNext(ctx.query.get('next')));
  });
  ctx.main.append(
    h('p', null, 'Sign in with the email and password you gave ', h('code', null, 'relay setup'), ' (or that your operator gave you).'),
    signIn,
  );
  (signIn.elements.namedItem('email') as HTMLInputElement).focus();
}
