// Building the page: elements from plain values, text always as text (never parsed as HTML,
// so nothing an email or a name holds can become markup), and the few widgets every page uses.
import { ApiError, withQuery, type AccessListener, type SessionListener } from './api.ts';
import { PAGES } from './route-table.ts';

export type Child = Node | string | number | null | undefined | false | Child[];
type AttrValue = string | number | boolean | null | undefined;
export type Attrs = Record<string, AttrValue | ((event: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs | null = null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (typeof value === 'function') element.addEventListener(name.replace(/^on/, ''), value);
    else if (value === true) element.setAttribute(name, '');
    else if (value !== false && value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

/** Replaces an element's content. */
export function fill(element: Element, ...children: Child[]): void {
  element.replaceChildren();
  append(element, children);
}

/**
 * The maxlength of a text input the API limits to `characters` (code points). The browser
 * counts UTF-16 code units, so `maxlength: characters` would cut off text the API takes (an
 * emoji is two units); twice lets all of it be typed, and the API refuses the rest with its own
 * message.
 */
export const maxCharacters = (characters: number): number => 2 * characters;

let ids = 0;
export const uniqueId = (prefix: string) => `${prefix}-${++ids}`;

/** A labelled control: the label names it for assistive technology, the hint describes it. */
export function field(label: string, control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, hint?: string): HTMLElement {
  control.id ||= uniqueId('f');
  const hintElement = hint ? h('p', { class: 'hint', id: `${control.id}-hint` }, hint) : null;
  if (hintElement) control.setAttribute('aria-describedby', hintElement.id);
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintElement);
}

export function select(name: string, options: Array<[value: string, label: string]>, selected: string | null = null, attrs: Attrs = {}): HTMLSelectElement {
  return h('select', { name, ...attrs }, options.map(([value, label]) => h('option', { value, selected: value === selected }, label)));
}

export function checkboxes(legend: string, name: string, options: string[], checked: readonly string[]): HTMLFieldSetElement {
  return h('fieldset', { class: 'choices' }, h('legend', null, legend), options.map((option) => {
    const id = uniqueId('c');
    return h('div', { class: 'choice' },
      h('input', { type: 'checkbox', id, name, value: option, checked: checked.includes(option) }),
      h('label', { for: id }, option));
  }));
}

export const checkedValues = (form: HTMLFormElement, name: string): string[] =>
  [...form.querySelectorAll<HTMLInputElement>(`input[name="${name}"]:checked`)].map((input) => input.value);

/** A status line (polite) or an error (assertive) that screen readers announce when it changes. */
export function notice(kind: 'info' | 'success' | 'error' | 'warning', ...children: Child[]): HTMLElement {
  return h('div', { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...children);
}

/** When an instant was, in the reader's time zone; the exact instant in the title and datetime. */
export function when(iso: string | null | undefined): Child {
  if (!iso) return '—';
  const date = new Date(iso);
  return h('time', { datetime: iso, title: iso }, date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }));
}

/** A table that scrolls sideways on narrow screens instead of widening the page. */
export function table(caption: string, headers: string[], rows: Child[][], empty = 'Nothing here yet.'): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
    h('table', null,
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', null, h('tr', null, headers.map((text) => h('th', { scope: 'col' }, text)))),
      h('tbody', null, rows.map((cells) => h('tr', null, cells.map((cell) => h('td', null, cell)))))));
}

export function badge(text: string, tone = text): HTMLElement {
  return h('span', { class: `badge badge-${tone.replace(/[^a-z_-]/gi, '')}` }, text);
}

/** A value to copy (a secret, a DNS record) with a button that puts it on the clipboard. */
export function copyable(label: string, value: string): HTMLElement {
  const output = h('code', { class: 'copy-value' }, value);
  const status = h('span', { class: 'copy-status', role: 'status' });
  const button = h('button', {
    type: 'button', class: 'secondary small', 'aria-label': `Copy ${label}`,
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(value);
        status.textContent = 'Copied';
      } catch {
        // No clipboard (an insecure origin, a refused permission): select it for Ctrl+C instead.
        getSelection()?.selectAllChildren(output);
        status.textContent = 'Selected: press Ctrl+C';
      }
    },
  }, 'Copy');
  return h('div', { class: 'copyable' }, output, button, status);
}

/**
 * Whether keyboard focus is lost: on <body>, where Chromium puts it when the focused control is
 * drawn away (and where a screen reader starts again from the top of the page), or on a control
 * just disabled (Chromium moves it from there to <body> at its next rendering).
 */
function focusLost(): boolean {
  const active = document.activeElement;
  return !active || active === document.body || !active.isConnected || active.matches(':disabled');
}

/**
 * Gives keyboard focus back, when it was lost, to the first of `targets` that can take it; a
 * message (a notice) is made focusable by script only, not by Tab.
 */
export function refocus(...targets: Array<HTMLElement | null | undefined>): void {
  if (!focusLost()) return;
  const target = targets.find((candidate) => candidate?.isConnected && !candidate.matches(':disabled'));
  if (!target) return;
  if (!target.hasAttribute('tabindex') && !target.matches('a[href], button, input, select, textarea, summary')) target.tabIndex = -1;
  target.focus();
}

/** What names a focusable element across redraws: its data-key, else its link's address, else its label. */
const focusKey = (element: HTMLElement): string | null => element.dataset.key ?? element.getAttribute('href') ?? element.getAttribute('aria-label');

/** The element of `container` whose data-key is `key` (a control drawn again, found by what it is about). */
export const keyed = (container: Element, key: string): HTMLElement | null =>
  [...container.querySelectorAll<HTMLElement>('[data-key]')].find((element) => element.dataset.key === key) ?? null;

/**
 * Draws `container` again with `draw`, and focuses again what had focus in it (found by
 * `focusKey`), if it is still there: the element focused is replaced, and focus would fall to <body>.
 */
export function redrawKeepingFocus(container: HTMLElement, draw: () => void): void {
  const active = document.activeElement;
  const key = active instanceof HTMLElement && container.contains(active) ? focusKey(active) : null;
  draw();
  if (key === null) return;
  refocus([...container.querySelectorAll<HTMLElement>('a[href], button, summary, [tabindex]')].find((element) => focusKey(element) === key));
}

/** The field a refusal is about, whatever its code: the API names it first ("body.name: …", "body.name is required"). */
const REFUSED_FIELD = /^body\.([A-Za-z0-9_]+)/;

type Control = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
const isControl = (element: unknown): element is Control =>
  element instanceof HTMLInputElement || element instanceof HTMLSelectElement || element instanceof HTMLTextAreaElement;

/** Marks `control` refused: invalid, and described by the refusal (after its hint). */
function markRefused(control: Control, refusal: HTMLElement): void {
  control.setAttribute('aria-invalid', 'true');
  control.setAttribute('aria-describedby', [control.getAttribute('aria-describedby'), refusal.id].filter(Boolean).join(' '));
  control.dataset.refusal = refusal.id;
}

function unmarkRefused(control: Control): void {
  const refusal = control.dataset.refusal;
  if (refusal === undefined) return;
  delete control.dataset.refusal;
  control.removeAttribute('aria-invalid');
  const rest = (control.getAttribute('aria-describedby') ?? '').split(/\s+/).filter((id) => id && id !== refusal);
  if (rest.length > 0) control.setAttribute('aria-describedby', rest.join(' '));
  else control.removeAttribute('aria-describedby');
}

/**
 * A form whose submission runs `submit` (an API call); a failure is shown inside the form, and
 * the field Relay refused, when it names one, is marked and focused. While it runs a second
 * submission (Enter twice, a double click) does nothing, and the buttons are aria-disabled, not
 * disabled: a disabled button loses focus, which letting it go does not bring back. Forms are
 * method=post so that, were the script not to run, nothing typed (a password) ends up in a URL.
 */
export function form(attrs: Attrs, children: Child[], submit: (form: HTMLFormElement) => Promise<void>): HTMLFormElement {
  const errors = h('div', { class: 'form-errors' });
  const element = h('form', { method: 'post', ...attrs }, ...children, errors);
  let busy = false;
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (busy) return;
    busy = true;
    const buttons = [...element.querySelectorAll<HTMLButtonElement>('button[type=submit]')];
    buttons.forEach((b) => b.setAttribute('aria-disabled', 'true'));
    element.setAttribute('aria-busy', 'true');
    for (const control of element.elements) if (isControl(control)) unmarkRefused(control);
    fill(errors);
    try {
      await submit(element);
    } catch (error) {
      const refusal = notice('error', (error as Error).message);
      refusal.id = uniqueId('refusal');
      fill(errors, refusal);
      // Whatever the code (validation_error, unsafe_destination, conflict): a refusal that names a field of this form is about it.
      const name = error instanceof ApiError ? REFUSED_FIELD.exec(error.message)?.[1] : undefined;
      const control = name === undefined ? null : element.elements.namedItem(name);
      if (isControl(control)) {
        markRefused(control, refusal);
        control.focus();
      } else refocus(refusal);
    } finally {
      busy = false;
      buttons.forEach((b) => b.removeAttribute('aria-disabled'));
      element.removeAttribute('aria-busy');
    }
  });
  // What is typed again is no longer what was refused; the refusal stays shown until the next submission.
  element.addEventListener('input', (event) => {
    if (isControl(event.target)) unmarkRefused(event.target);
  });
  return element;
}

/** Controls whose action is running: activating one again meanwhile does nothing. */
const running = new WeakSet<HTMLButtonElement>();

/**
 * Runs `run` (an API call) for `button`: aria-disabled and aria-busy meanwhile (disabled would
 * take focus away), let go however it ends; a failure is shown in `status`. When it is done and
 * focus was lost (the button drawn again), focus goes to `focusAfter`, else to the notice in `status`.
 */
async function runAction(button: HTMLButtonElement, status: HTMLElement, run: () => Promise<void>, focusAfter?: () => HTMLElement | null): Promise<void> {
  running.add(button);
  button.setAttribute('aria-disabled', 'true');
  button.setAttribute('aria-busy', 'true');
  fill(status);
  try {
    await run();
  } catch (error) {
    fill(status, notice('error', (error as Error).message));
  } finally {
    running.delete(button);
    button.removeAttribute('aria-disabled');
    button.removeAttribute('aria-busy');
    refocus(focusAfter?.(), status.querySelector<HTMLElement>('.notice'));
  }
}

export interface Action {
  /** Where a failure is shown. */
  status: HTMLElement;
  /**
   * Asked first (what happens, said at the time of the click; null: nothing to ask this time);
   * cancelling sends nothing and says nothing.
   */
  confirm?: string | (() => string | null);
  /** Told when the question is cancelled (a choice put back as it was). */
  cancelled?: () => void;
  /** The control that replaces the button once the action has drawn it again (found by `keyed`); else (none, or disabled) the notice in `status`. */
  focusAfter?: () => HTMLElement | null;
}

/**
 * Draws a view again with `load` after an action Relay has done, once the page has said so (a new
 * key's secret, "Revoked …"): what the answer said must not wait on a second request, which may
 * fail or hang on its own (the session ended just then, Relay restarting). A failed read adds to
 * `where` that the view could not be read again; it never says the action failed, which the
 * reader would take as a reason to do it again.
 */
export async function redrawAfterAction(where: HTMLElement, load: () => Promise<unknown>): Promise<void> {
  try {
    await load();
  } catch (error) {
    const why = error instanceof ApiError && error.code === 'session_required'
      ? 'your session has ended: sign in again with the link at the top of the page'
      : (error as Error).message;
    append(where, [notice('warning', `That was done, but the list could not be read again, so it may not show it yet (${why}). Reload the page to see it as it is now.`)]);
  }
}

/** A button outside a form that runs `run` (an API call): asked first when it undoes something, held while it runs, a failure shown in `status`. */
export function actionButton(label: string, attrs: Attrs, { status, confirm: question, cancelled, focusAfter }: Action, run: () => Promise<void>): HTMLButtonElement {
  const button: HTMLButtonElement = h('button', {
    type: 'button', ...attrs,
    onclick: () => {
      // A double click: the first runs, the second neither asks nor sends.
      if (running.has(button)) return;
      const asked = typeof question === 'function' ? question() : question;
      // Cancelling is a choice, not a failure: nothing is sent and nothing is said.
      if (asked !== undefined && asked !== null && !confirm(asked)) {
        cancelled?.();
        return;
      }
      void runAction(button, status, run, focusAfter);
    },
  }, label);
  return button;
}

/** Where signing in again from another tab leads: a page that says it is done, and to come back. */
const SIGNED_IN_PATH = PAGES.find((page) => page.module === 'signed-in')!.path;

/**
 * Said at the top of a drawn page (kept in view) when its session ends: a sign-in in a new tab,
 * so that this page and what is typed in it stay; gone once a request of the page works again.
 * And, on a page of a workspace (`workspaceName`), when a request finds the reader no longer a
 * member of it (removed meanwhile): that access was removed, with a way to the workspaces the
 * reader still has; it stays, since no request of this page can work again.
 */
export function sessionNotice(workspaceName: string | null = null): SessionListener & AccessListener & { element: HTMLElement } {
  const element = h('div', { class: 'session-status' });
  // Each added and taken away on its own, so that one notice coming or going does not make
  // assistive technology read the other one (an alert) out again.
  let ended: HTMLElement | null = null;
  let removed: HTMLElement | null = null;
  return {
    element,
    ended() {
      if (ended) return;
      ended = notice('error', h('strong', null, 'Your session has ended. '),
        h('a', { href: withQuery('/sign-in', { next: SIGNED_IN_PATH }), target: '_blank' }, 'Sign in again (opens a new tab)'),
        ', then come back to this tab and try again: what you typed here is kept.');
      element.append(ended);
    },
    resumed() {
      ended?.remove();
      ended = null;
    },
    removed() {
      if (removed) return;
      removed = notice('error', h('strong', null, `Your access to ${workspaceName === null ? 'this workspace' : `the workspace ${workspaceName}`} was removed. `),
        'You are no longer a member of it, so this page is no longer updated and nothing on it can be changed. ',
        h('a', { href: '/' }, 'Go to your workspaces'), '.');
      element.prepend(removed);
    },
  };
}

export const value = (form: HTMLFormElement, name: string): string => {
  const control = form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | null;
  return control ? control.value : '';
};

export function section(title: string, ...children: Child[]): HTMLElement {
  const id = uniqueId('s');
  return h('section', { 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

/** A definition list of label → value pairs. */
export function facts(pairs: Array<[string, Child]>): HTMLElement {
  return h('dl', { class: 'facts' }, pairs.map(([term, detail]) => [h('dt', null, term), h('dd', null, detail)]));
}
