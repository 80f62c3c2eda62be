// The message itself, while its bodies are retained: the HTML part framed from its own route
// (its own CSP, <iframe sandbox> with neither allow-scripts nor allow-same-origin and its links
// opening in new tabs: email-frame.ts; remote images blocked until the reader asks), the text
// part, the headers, and the raw source as the outbox wrote it. After seven days: "content
// expired".
import { ApiError, get, request } from '../api.ts';
import type { PageContext } from '../context.ts';
import { EMAIL_FRAME_SANDBOX } from '../email-frame.ts';
import { facts, fill, h, notice, section, when, type Child } from '../dom.ts';

interface EmailMessage {
  id: string; from: string; to: string[]; cc: string[]; replyTo: string | null; subject: string;
  headers: Record<string, string>; html: string | null; text: string | null; retainedUntil: string;
}

function htmlPart(path: string): HTMLElement {
  let remote = false;
  const frame = h('iframe', {
    sandbox: EMAIL_FRAME_SANDBOX, src: `${path}.html`, title: 'The HTML part of the message', class: 'message-frame', referrerpolicy: 'no-referrer',
  });
  const state = h('span', { role: 'status' });
  const toggle = h('button', { type: 'button', class: 'secondary small' });
  const show = () => {
    frame.src = `${path}.html${remote ? '?remote_images=on' : ''}`;
    state.textContent = remote ? 'Remote images are shown: their servers learn that the message was opened, and from where.' : 'Remote images are blocked. ';
    toggle.textContent = remote ? 'Block remote images' : 'Load remote images';
  };
  toggle.addEventListener('click', () => {
    remote = !remote;
    show();
  });
  show();
  return h('div', null, h('p', { class: 'actions' }, state, toggle), frame);
}

/**
 * Read when the details are first opened, and kept once read. Anything else shown there (a
 * failure, "not in the outbox") is read again at the next opening: a failure may have passed
 * (the session back, Relay restarted), and an email still being delivered is in the outbox later.
 */
function rawSource(projectId: string, emailId: string): HTMLElement {
  const body = h('div');
  const details = h('details', null, h('summary', null, 'Show the raw source'), body);
  let source: HTMLElement | null = null;
  let reading = false;
  details.addEventListener('toggle', async () => {
    if (!details.open || source !== null || reading) return;
    reading = true;
    try {
      const raw = await (await request('GET', `/v1/projects/${projectId}/outbox/${emailId}`)).text();
      source = h('pre', { tabindex: 0, role: 'region', 'aria-label': 'Raw source' }, raw);
      fill(body, source);
    } catch (error) {
      fill(body, error instanceof ApiError && error.status === 404
        ? notice('info', 'Not in the outbox: Relay keeps the bytes of a message only with the outbox transport (RELAY_DELIVERY=outbox, the development default); with smtp or mx they go on the wire.')
        : notice('error', (error as Error).message));
    } finally {
      reading = false;
    }
  });
  return details;
}

export async function render(ctx: PageContext): Promise<void> {
  const projectId = ctx.project!.id;
  const emailId = ctx.params.emailId;
  const path = `/v1/projects/${projectId}/emails/${emailId}/message`;
  const back = h('p', null, h('a', { href: `/projects/${projectId}/emails/${emailId}` }, '← The email'));
  let message: EmailMessage;
  try {
    message = await get<EmailMessage>(path);
  } catch (error) {
    if (!(error instanceof ApiError && error.code === 'content_expired')) throw error;
    ctx.title('Content expired');
    ctx.main.append(back, notice('info', h('strong', null, 'Content expired. '),
      'Relay keeps message bodies for seven days; this one has been destroyed. The email\'s timeline, recipients and webhook deliveries remain.'));
    return;
  }
  ctx.title(message.subject);
  // Name and value pairs, as facts (not a table: a long value, a List-Unsubscribe token, wraps
  // rather than widening a column the reader must scroll across).
  const headerFacts: Array<[string, Child]> = [
    ['From', message.from], ['To', message.to.join(', ')],
    ...(message.cc.length ? [['Cc', message.cc.join(', ')] as [string, Child]] : []),
    ...(message.replyTo ? [['Reply-To', message.replyTo] as [string, Child]] : []),
    ['Subject', message.subject],
    ...Object.entries(message.headers).map(([name, v]): [string, Child] => [name, v]),
  ];
  ctx.main.append(
    back,
    facts([['Kept until', when(message.retainedUntil)]]),
    section('HTML part', message.html === null ? h('p', { class: 'empty' }, 'This message has no HTML part.') : htmlPart(path)),
    section('Text part', message.text === null ? h('p', { class: 'empty' }, 'This message has no text part.') : h('pre', { tabindex: 0, role: 'region', 'aria-label': 'Text part' }, message.text)),
    section('Headers',
      h('p', { class: 'hint' }, 'As the sender gave them. Relay adds its own when it composes the message (Message-ID, DKIM-Signature, …): see the raw source.'),
      facts(headerFacts)),
    section('Raw source', rawSource(projectId, emailId)),
  );
}
