// Create or edit a template with a live preview (POST /v1/templates/preview: handlebars, MJML,
// sanitized as a send would be). Saving names the revision it was edited from: if someone
// saved meanwhile, the 409 shows both versions side by side, to reload theirs or keep yours.
// "Send a test" sends the saved template to one address the project may send to.
import { ApiError, api, get, withQuery } from '../api.ts';
import type { PageContext } from '../context.ts';
import { EMAIL_FRAME_SANDBOX, previewSrcdoc } from '../email-frame.ts';
import { actionButton, append, type Child, field, fill, form, h, maxCharacters, notice, section, value, when } from '../dom.ts';

interface Template {
  id: string; projectId: string; name: string; slug: string; subject: string; html: string | null; text: string | null;
  revision: number; variables: string[]; createdAt: string; updatedAt: string;
}
interface Content { name: string; slug: string; subject: string; html: string | null; text: string | null }

const CONTENT_FIELDS = ['name', 'slug', 'subject', 'html', 'text'] as const;
const PREVIEW_DELAY_MS = 400;

/** Empty bodies are null, as the API has them. */
function contentOf(element: HTMLFormElement): Content {
  const body = (name: string) => (value(element, name) === '' ? null : value(element, name));
  return { name: value(element, 'name'), slug: value(element, 'slug'), subject: value(element, 'subject'), html: body('html'), text: body('text') };
}

function version(caption: string, content: Content): HTMLElement {
  return h('div', null, h('h3', null, caption), ...CONTENT_FIELDS.map((name) =>
    h('div', null, h('p', { class: 'hint' }, name), h('pre', { tabindex: 0, role: 'region', 'aria-label': `${caption}: ${name}` }, content[name] ?? '(empty)'))));
}

export async function render(ctx: PageContext): Promise<void> {
  const projectId = ctx.project!.id;
  const list = `/projects/${projectId}/templates`;
  const isNew = ctx.params.templateId === 'new';
  let current: Template | null = isNew ? null : await get<Template>(withQuery(`/v1/templates/${ctx.params.templateId}`, { projectId }));
  ctx.title(current ? current.name : 'New template');
  const readOnly = !ctx.can.write;

  const status = h('div');
  const conflict = h('div');
  const revision = h('p', { class: 'hint' });
  /** The revision the editor's content is saved against: it changes with each save and with a conflict's choice. */
  const drawRevision = () => {
    if (current) fill(revision, `Revision ${current.revision}, saved `, when(current.updatedAt));
  };
  const variables = h('textarea', { name: 'variables', rows: 4, spellcheck: 'false' },
    JSON.stringify(Object.fromEntries((current?.variables ?? ['name']).map((name) => [name, name])), null, 2));
  const editor = form({ 'aria-label': 'Template', class: 'editor' }, [
    field('Name', h('input', { name: 'name', required: true, maxlength: maxCharacters(100), value: current?.name ?? '', readonly: readOnly })),
    field('Slug', h('input', { name: 'slug', required: true, maxlength: 80, pattern: '[a-z0-9]+(-[a-z0-9]+)*', value: current?.slug ?? '', readonly: readOnly }),
      'What a template send names: lowercase letters and digits in groups joined by single hyphens.'),
    field('Subject', h('input', { name: 'subject', required: true, maxlength: maxCharacters(998), value: current?.subject ?? '', readonly: readOnly }),
      'Handlebars: {{name}} inserts the variable "name".'),
    field('HTML', h('textarea', { name: 'html', rows: 14, spellcheck: 'false', readonly: readOnly }, current?.html ?? ''),
      'Handlebars, or MJML (starting with <mjml>). Sanitized when rendered.'),
    field('Text', h('textarea', { name: 'text', rows: 6, readonly: readOnly }, current?.text ?? '')),
    readOnly ? null : h('div', { class: 'actions' },
      h('button', { type: 'submit' }, current ? 'Save' : 'Create template'),
      current ? actionButton('Delete', { class: 'danger' }, {
        status, confirm: () => `Delete the template "${current!.name}"? Emails already sent keep their content.`,
      }, remove) : null),
  ], save);

  // --- live preview -------------------------------------------------------------------
  const previewSubject = h('p', { class: 'preview-subject' });
  const previewFrame = h('iframe', { sandbox: EMAIL_FRAME_SANDBOX, title: 'Preview of the HTML part', class: 'message-frame' });
  const previewText = h('pre', { tabindex: 0, role: 'region', 'aria-label': 'Preview of the text part' });
  const previewState = h('div', { 'aria-live': 'polite' });
  let timer: number | undefined;
  let asked = 0;
  async function preview(): Promise<void> {
    const mine = ++asked;
    let vars: unknown;
    try {
      vars = JSON.parse(variables.value || '{}');
    } catch {
      fill(previewState, notice('error', 'Variables: not valid JSON.'));
      return;
    }
    const content = contentOf(editor);
    if (content.subject.trim() === '') {
      fill(previewState, notice('info', 'Write a subject to see the preview.'));
      return;
    }
    try {
      const rendered = await api<{ subject: string; html: string; text: string }>('POST', withQuery('/v1/templates/preview', { projectId }), {
        subject: content.subject, html: content.html, text: content.text, variables: vars,
      });
      if (mine !== asked) return;
      fill(previewState);
      previewSubject.textContent = `Subject: ${rendered.subject}`;
      previewFrame.srcdoc = previewSrcdoc(rendered.html);
      previewText.textContent = rendered.text;
    } catch (error) {
      if (mine !== asked) return;
      const wait = error instanceof ApiError && error.status === 429 ? ` Previewing again in ${error.retryAfter ?? 1} s.` : '';
      fill(previewState, notice(wait ? 'warning' : 'error', (error as Error).message + wait));
      if (wait) timer = window.setTimeout(preview, ((error as ApiError).retryAfter ?? 1) * 1000);
    }
  }
  const schedule = () => {
    clearTimeout(timer);
    timer = window.setTimeout(preview, PREVIEW_DELAY_MS);
  };
  editor.addEventListener('input', schedule);
  variables.addEventListener('input', schedule);

  // --- saving, and the stale revision ---------------------------------------------------
  async function save(element: HTMLFormElement): Promise<void> {
    const content = contentOf(element);
    fill(status);
    if (!current) {
      const created = await api<Template>('POST', withQuery('/v1/templates', { projectId }), content);
      location.assign(`${list}/${created.id}`);
      return;
    }
    try {
      current = await api<Template>('PATCH', withQuery(`/v1/templates/${current.id}`, { projectId }), { ...content, revision: current.revision });
      fill(conflict);
      fill(status, notice('success', `Saved: revision ${current.revision}.`));
      ctx.title(current.name);
      drawRevision();
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 409)) throw error;
      const saved = await get<Template>(withQuery(`/v1/templates/${current.id}`, { projectId }));
      if (saved.revision === current.revision) throw error; // the slug is taken: the message says so
      showConflict(content, saved);
    }
  }

  function showConflict(mine: Content, saved: Template): void {
    fill(conflict, h('div', { class: 'notice notice-warning', role: 'alert' },
      h('h2', null, 'This template changed while you were editing'),
      h('p', null, `Revision ${saved.revision} was saved `, when(saved.updatedAt), `; you started from revision ${current!.revision}. Nothing of yours was saved.`),
      h('div', { class: 'columns' }, version('Your version', mine), version(`Saved version (revision ${saved.revision})`, saved)),
      h('div', { class: 'actions' },
        h('button', {
          type: 'button',
          onclick: () => {
            current = saved;
            for (const name of CONTENT_FIELDS) (editor.elements.namedItem(name) as HTMLInputElement).value = saved[name] ?? '';
            fill(conflict);
            fill(status, notice('info', `Reloaded revision ${saved.revision}.`));
            drawRevision();
            schedule();
          },
        }, 'Reload the saved version'),
        h('button', {
          type: 'button', class: 'secondary',
          onclick: () => {
            current = saved;
            fill(conflict);
            fill(status, notice('info', `Your version will replace revision ${saved.revision} when you save.`));
            drawRevision();
          },
        }, 'Keep my version'))));
    conflict.scrollIntoView();
  }

  async function remove(): Promise<void> {
    await api('DELETE', withQuery(`/v1/templates/${current!.id}`, { projectId }));
    location.assign(list);
  }

  // --- send a test ------------------------------------------------------------------------
  async function testSection(): Promise<Child> {
    if (!current || readOnly) return null;
    const { domains } = await get<{ domains: Array<{ name: string; status: string; projectIds: string[] }> }>(`/v1/workspaces/${ctx.workspace!.workspaceId}/domains`);
    const usable = domains.find((d) => d.status === 'verified' && d.projectIds.includes(projectId));
    const outcome = h('div');
    return section('Send a test',
      h('p', { class: 'hint' }, `Sends the saved revision with the variables above, as a template send of this project: a ${ctx.project!.environment} project `,
        ctx.project!.environment === 'development' ? 'sends only to its own verified domains.' : 'sends to anyone.'),
      form({ 'aria-label': 'Send a test' }, [
        field('From', h('input', { name: 'from', required: true, value: usable ? `Relay test <test@${usable.name}>` : '' }),
          usable ? undefined : 'No verified domain is connected to this project yet.'),
        field('To', h('input', { name: 'to', type: 'email', required: true, value: usable && ctx.project!.environment === 'development' ? `test@${usable.name}` : '' })),
        h('button', { type: 'submit' }, 'Send the test'),
        outcome,
      ], async (element) => {
        let vars: unknown;
        try {
          vars = JSON.parse(variables.value || '{}');
        } catch {
          throw new Error('Variables: not valid JSON.');
        }
        const sent = await api<{ id: string; status: string }>('POST', withQuery(`/v1/templates/${current!.id}/test`, { projectId }), {
          from: value(element, 'from'), to: value(element, 'to'), variables: vars,
        });
        fill(outcome, notice('success', `Test ${sent.status}. `, h('a', { href: `/projects/${projectId}/emails/${sent.id}` }, 'See the email')));
      }));
  }

  drawRevision();
  append(ctx.main, [
    h('p', null, h('a', { href: list }, '← All templates')),
    current ? revision : null,
    readOnly ? notice('info', 'You can read and preview this template; your role cannot change it.') : null,
    status,
    conflict,
    h('div', { class: 'columns' },
      h('div', null, editor),
      h('div', null, section('Preview', field('Variables (JSON)', variables), previewState, previewSubject, previewFrame, previewText))),
    await testSection(),
  ]);
  if (current || !readOnly) await preview();
}
