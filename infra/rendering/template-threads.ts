// Template work (MJML compilation, handlebars compilation, rendering, sanitizing) off the event
// loop, each job with a time limit: a 936 KB MJML preview took 4.5 s and a template with
// entity-heavy values 2.5 s per send on the loop the API shares. Two threads, so that authors
// cannot hold up sends: one compiles what is saved and previewed, the other renders sends (and
// keeps their compiled templates, by id and revision, as the event loop used to). A job that
// outlasts the limit is stopped (its thread is replaced) and refused with a clear error; a
// thread with too much waiting refuses more at once (503, retry).
//
// A send costs one round trip to the rendering thread: the values go there and the rendered
// subject and bodies come back (test/bench/render.bench.ts measures it).
import { RelayError } from '../../domain/errors.ts';
import type { TemplateVariables } from '../../domain/templates/variables.ts';
import { WorkerBudgetError, WorkerQueue, WorkerQueueFullError } from '../threads/worker-queue.ts';
import type { RenderedEmail, TemplateSource } from './template-renderer.ts';
import type { TemplateJob, TemplateReply } from './template-worker.ts';

export interface TemplateThreadsOptions {
  /** The most one compile, preview or send rendering may take (RELAY_TEMPLATE_TIME_LIMIT_MS). */
  timeLimitMs: number;
}

export interface CompiledSummary { variables: string[]; mjml: boolean }
export interface Rendering { variables: string[]; rendered: RenderedEmail }

const WORKER_URL = new URL('./template-worker.ts', import.meta.url);
/** Saves and previews waiting behind the running one (previews are rate-limited per session too). */
const MAX_WAITING_AUTHORING = 16;
/** Send renderings waiting behind the running one: each usually takes well under a millisecond. */
const MAX_WAITING_SENDS = 1000;
/** Revisions the rendering thread was given the source of (it may have let some go, or restarted: it then asks again). */
const MAX_REMEMBERED = 1000;

type Done = Extract<TemplateReply, { variables: string[] }>;

/** A reply that is neither a refusal (thrown by #run) nor a request for the source (which the source answers). */
function settled(reply: Exclude<TemplateReply, { refused: unknown }>): Done {
  if ('missing' in reply) throw new Error('the template thread asked for a template it was given');
  return reply;
}

export class TemplateThreads {
  readonly timeLimitMs: number;
  readonly #authoring: WorkerQueue<TemplateJob, TemplateReply>;
  readonly #sending: WorkerQueue<TemplateJob, TemplateReply>;
  readonly #given = new Set<string>();
  /** Send renderings that had to take the template's source along (its revision was new to the thread). */
  sourcesGiven = 0;

  constructor(options: TemplateThreadsOptions) {
    this.timeLimitMs = options.timeLimitMs;
    const common = { workerUrl: WORKER_URL, budgetMs: options.timeLimitMs };
    // Authors' work gives way to requests (sends among them) when the cores are contended.
    this.#authoring = new WorkerQueue({ ...common, maxWaiting: MAX_WAITING_AUTHORING, niceIncrement: 5, name: 'template compilation' });
    this.#sending = new WorkerQueue({ ...common, maxWaiting: MAX_WAITING_SENDS, name: 'template rendering' });
  }

  /** A template being saved: its variables, or a 400 naming the field (syntax, constructs, MJML, nesting, time). */
  async compile(source: TemplateSource, prefix: string): Promise<CompiledSummary> {
    const reply = settled(await this.#run(this.#authoring, { op: 'compile', source, prefix }, () =>
      new RelayError('validation_error', `${prefix}: compiling the template took longer than ${this.#limit()} (the limit); make it smaller or simpler`)));
    return { variables: reply.variables, mjml: reply.mjml };
  }

  /** Compiles and renders, nothing kept: 400 for the template, 422 for variables that do not fit it. */
  async preview(source: TemplateSource, values: TemplateVariables, prefix = 'body', variablesField = 'body.variables'): Promise<Rendering> {
    const reply = settled(await this.#run(this.#authoring, { op: 'preview', source, values, prefix, variablesField }, () =>
      new RelayError('validation_error', `${prefix}: rendering this preview took longer than ${this.#limit()} (the limit); make the template smaller or simpler`)));
    return { variables: reply.variables, rendered: reply.rendered! };
  }

  /** Renders a saved revision for a send: 422 naming `variablesField` when the values do not fit or it takes too long. */
  async render(template: TemplateSource & { _id: string; revision: number }, values: TemplateVariables, variablesField = 'body.variables'): Promise<Rendering> {
    const key = { id: template._id, revision: template.revision };
    const known = `${key.id}@${key.revision}`;
    const tooLong = () => new RelayError('invalid_template_variables', `${variablesField}: rendering the template with these variables took longer than ${this.#limit()} (the limit)`);
    const source = { subject: template.subject, html: template.html, text: template.text };
    const withSource = () => {
      this.sourcesGiven++;
      return this.#run(this.#sending, { op: 'render', key, values, variablesField, source }, tooLong);
    };
    let reply = this.#given.has(known) ? await this.#run(this.#sending, { op: 'render', key, values, variablesField }, tooLong) : await withSource();
    if ('missing' in reply) reply = await withSource();
    if (this.#given.size >= MAX_REMEMBERED) this.#given.clear();
    this.#given.add(known);
    const done = settled(reply);
    return { variables: done.variables, rendered: done.rendered! };
  }

  async close(): Promise<void> {
    await Promise.all([this.#authoring.close(), this.#sending.close()]);
  }

  #limit(): string {
    return this.timeLimitMs % 1000 === 0 ? `${this.timeLimitMs / 1000} s` : `${this.timeLimitMs} ms`;
  }

  async #run(queue: WorkerQueue<TemplateJob, TemplateReply>, job: TemplateJob, tooLong: () => RelayError): Promise<Exclude<TemplateReply, { refused: unknown }>> {
    let reply: TemplateReply;
    try {
      reply = await queue.run(job);
    } catch (error) {
      if (error instanceof WorkerBudgetError) throw tooLong();
      if (error instanceof WorkerQueueFullError) throw new RelayError('service_unavailable', 'templates are busy: retry in 1 second', { retryAfterSeconds: 1 });
      throw error;
    }
    if ('refused' in reply) throw new RelayError(reply.refused.code, reply.refused.message);
    return reply;
  }
}
