// Template work (MJML compilation, handlebars compilation, rendering, sanitizing) off the event
// loop, each job with a time limit: a 936 KB MJML preview took 4.5 s and a template with
// entity-heavy values 2.5 s per send on the loop the API shares. Two threads, so that authors
// cannot hold up sends: one compiles what is saved and previewed, the other renders sends (and
// keeps their compiled templates, by id and revision, as the event loop used to). A job that
// outlasts the limit, or takes its thread past TEMPLATE_THREAD_HEAP_MB, is stopped (its thread
// is replaced) and refused with a clear error.
//
// Each thread is shared by every workspace, so each job names its workspace (the tenant) and
// the workspaces take turns on the thread by the thread time their jobs use
// (infra/threads/worker-queue.ts): a workspace whose jobs just held the thread for the time
// limit (and ended it) waits while other workspaces' quick sends or previews run, and a
// workspace's backlog never waits in front of another workspace's job. Beyond a few waiting jobs
// of one workspace, or many in all, the next is refused at once, and a job that could not start
// within about the time limit (a replacement thread's start-up not counted) is refused then
// (503, retry), so no one waits without a deadline.
//
// A send costs one round trip to the rendering thread: the values go there and the rendered
// subject and bodies come back (test/bench/render.bench.ts measures it).
import { RelayError } from '../../domain/errors.ts';
import type { TemplateVariables } from '../../domain/templates/variables.ts';
import { WorkerBudgetError, WorkerOutOfMemoryError, WorkerQueue, WorkerQueueFullError, WorkerStartError, WorkerWaitError } from '../threads/worker-queue.ts';
import type { ThreadStartReport } from '../threads/thread-starts.ts';
import type { RenderedEmail, TemplateSource } from './template-renderer.ts';
import type { TemplateJob, TemplateReply } from './template-worker.ts';

/**
 * Each template thread's V8 heap (old generation), MB. Without a limit each could grow to the
 * process's default heap (4 GB on a machine with 24 GB), and one running out of it was answered
 * 500. The time limit should still be what ends a heavy job (it stops the thread at once, where
 * one nearing its heap limit slows down collecting garbage first, and Node ends a thread at
 * its limit only as best it can: see YOUNG_GENERATION_MB in infra/threads/worker-queue.ts), so
 * this is above what a job reaches within the default 2 s: on Node 24,
 * 60,000 {{v}} (300,000 characters) rendered in 1.9 s and peaked at 600 MB; 100,000 had reached
 * 540 MB at 2 s. The rest is room for the compiled-template cache (128 MiB, ./template-worker.ts)
 * and a faster machine.
 */
export const TEMPLATE_THREAD_HEAP_MB = 1024;

export interface TemplateThreadsOptions {
  /** The most one compile, preview or send rendering may take (RELAY_TEMPLATE_TIME_LIMIT_MS). */
  timeLimitMs: number;
  /** Each thread's heap, MB; TEMPLATE_THREAD_HEAP_MB unless a test makes it small. */
  heapMb?: number;
  /** Told when a queue's threads fail to start and when one starts again (the process logs and counts it). */
  onThreadStart?: (pool: TemplatePool) => ThreadStartReport;
}

/** The two queues, as logs and metrics name them. */
export type TemplatePool = 'template_compilation' | 'template_rendering';

export interface CompiledSummary { variables: string[]; mjml: boolean }
export interface Rendering { variables: string[]; rendered: RenderedEmail }

/** Template work done for one workspace: its jobs take turns with other workspaces' jobs. */
export interface WorkspaceTemplates {
  compile(source: TemplateSource, prefix: string): Promise<CompiledSummary>;
  preview(source: TemplateSource, values: TemplateVariables, prefix?: string, variablesField?: string): Promise<Rendering>;
  render(template: TemplateSource & { _id: string; revision: number }, values: TemplateVariables, variablesField?: string): Promise<Rendering>;
}

const WORKER_URL = new URL('./template-worker.ts', import.meta.url);
/** Saves and previews waiting behind the running one, all workspaces together (previews are rate-limited per session too). */
const MAX_WAITING_AUTHORING = 32;
/**
 * Saves and previews of one workspace waiting: beyond, its load is refused to it, not to other
 * workspaces (it takes four to fill the queue). Eight, so that a few members saving at once are
 * not refused.
 */
const MAX_WAITING_AUTHORING_PER_WORKSPACE = 8;
/** Send renderings waiting behind the running one: each usually takes well under a millisecond. */
const MAX_WAITING_SENDS = 1000;
/** Send renderings of one workspace waiting: a quarter, so that one workspace cannot fill the queue. */
const MAX_WAITING_SENDS_PER_WORKSPACE = 250;
/**
 * The least a job may wait for its turn, however short the time limit: a thread stopped at the
 * limit takes a few hundred ms to start again (loading MJML), and a job should not be refused
 * for that alone.
 */
const MIN_WAIT_MS = 1000;
/** Revisions the rendering thread was given the source of (it may have let some go: it then asks again). */
const MAX_REMEMBERED = 1000;

type Done = Extract<TemplateReply, { variables: string[] }>;
type Why = 'time' | 'memory';

/** A reply that is neither a refusal (thrown by #run) nor a request for the source (which the source answers). */
function settled(reply: Exclude<TemplateReply, { refused: unknown }>): Done {
  if ('missing' in reply) throw new Error('the template thread asked for a template it was given');
  return reply;
}

export class TemplateThreads {
  readonly timeLimitMs: number;
  readonly heapMb: number;
  /** How long a job may wait for its turn before it is refused (503). */
  readonly maxWaitMs: number;
  readonly #authoring: WorkerQueue<TemplateJob, TemplateReply>;
  readonly #sending: WorkerQueue<TemplateJob, TemplateReply>;
  /** Revisions the rendering thread was given the source of, with its threadGeneration then. */
  readonly #given = new Map<string, number>();
  /** Send renderings that had to take the template's source along (its revision was new to the thread). */
  sourcesGiven = 0;

  constructor(options: TemplateThreadsOptions) {
    this.timeLimitMs = options.timeLimitMs;
    this.heapMb = options.heapMb ?? TEMPLATE_THREAD_HEAP_MB;
    this.maxWaitMs = Math.max(options.timeLimitMs, MIN_WAIT_MS);
    const common = { workerUrl: WORKER_URL, budgetMs: options.timeLimitMs, maxWaitMs: this.maxWaitMs, maxHeapMb: this.heapMb };
    const reportOf = (pool: TemplatePool) => (options.onThreadStart ? { onThreadStart: options.onThreadStart(pool) } : {});
    // Authors' work gives way to requests (sends among them) when the cores are contended.
    this.#authoring = new WorkerQueue({
      ...common, maxWaiting: MAX_WAITING_AUTHORING, maxWaitingPerTenant: MAX_WAITING_AUTHORING_PER_WORKSPACE, niceIncrement: 5, name: 'template compilation',
      ...reportOf('template_compilation'),
    });
    this.#sending = new WorkerQueue({
      ...common, maxWaiting: MAX_WAITING_SENDS, maxWaitingPerTenant: MAX_WAITING_SENDS_PER_WORKSPACE, name: 'template rendering', ...reportOf('template_rendering'),
    });
  }

  /** The template work of one workspace (its id). */
  of(workspaceId: string): WorkspaceTemplates {
    return {
      compile: (source, prefix) => this.compile(workspaceId, source, prefix),
      preview: (source, values, prefix, variablesField) => this.preview(workspaceId, source, values, prefix, variablesField),
      render: (template, values, variablesField) => this.render(workspaceId, template, values, variablesField),
    };
  }

  /** A template being saved, compiled and rehearsed as its sends will render it: its variables, or a 400 naming the field (syntax, constructs, MJML, nesting, variables, size, time, memory). */
  async compile(workspaceId: string, source: TemplateSource, prefix: string): Promise<CompiledSummary> {
    const reply = settled(await this.#run(this.#authoring, workspaceId, () => ({ op: 'compile', source, prefix }), (why) =>
      new RelayError('validation_error', `${prefix}: compiling the template ${this.#exceeded(why)}; make it smaller or simpler`)));
    return { variables: reply.variables, mjml: reply.mjml };
  }

  /** Compiles and renders, nothing kept: 400 for the template, 422 for variables that do not fit it. */
  async preview(workspaceId: string, source: TemplateSource, values: TemplateVariables, prefix = 'body', variablesField = 'body.variables'): Promise<Rendering> {
    const reply = settled(await this.#run(this.#authoring, workspaceId, () => ({ op: 'preview', source, values, prefix, variablesField }), (why) =>
      new RelayError('validation_error', `${prefix}: rendering this preview ${this.#exceeded(why)}; make the template smaller or simpler`)));
    return { variables: reply.variables, rendered: reply.rendered! };
  }

  /** Renders a saved revision for a send: 422 naming `variablesField` when the values do not fit or it takes too long or too much memory. */
  async render(workspaceId: string, template: TemplateSource & { _id: string; revision: number }, values: TemplateVariables, variablesField = 'body.variables'): Promise<Rendering> {
    const key = { id: template._id, revision: template.revision };
    const known = `${key.id}@${key.revision}`;
    const refused = (why: Why) => new RelayError('invalid_template_variables', `${variablesField}: rendering the template with these variables ${this.#exceeded(why)}`);
    const source = { subject: template.subject, html: template.html, text: template.text };
    const withSource = (): TemplateJob => {
      this.sourcesGiven++;
      return { op: 'render', key, values, variablesField, source };
    };
    // Made when its turn comes: a thread that replaced the one given the source (a job before
    // it was stopped) is given it again, rather than asking for it and waiting a second turn.
    const job = () => (this.#given.get(known) === this.#sending.threadGeneration ? { op: 'render' as const, key, values, variablesField } : withSource());
    let reply = await this.#run(this.#sending, workspaceId, job, refused);
    // The thread let it go (its cache was full).
    if ('missing' in reply) reply = await this.#run(this.#sending, workspaceId, withSource, refused);
    if (this.#given.size >= MAX_REMEMBERED) this.#given.clear();
    this.#given.set(known, this.#sending.threadGeneration);
    const done = settled(reply);
    return { variables: done.variables, rendered: done.rendered! };
  }

  async close(): Promise<void> {
    await Promise.all([this.#authoring.close(), this.#sending.close()]);
  }

  #exceeded(why: Why): string {
    return why === 'time'
      ? `took longer than ${this.#limit()} (the limit)`
      : 'needed more memory than a template thread may use';
  }

  #limit(): string {
    return this.timeLimitMs % 1000 === 0 ? `${this.timeLimitMs / 1000} s` : `${this.timeLimitMs} ms`;
  }

  async #run(
    queue: WorkerQueue<TemplateJob, TemplateReply>, workspaceId: string, job: () => TemplateJob, refused: (why: Why) => RelayError,
  ): Promise<Exclude<TemplateReply, { refused: unknown }>> {
    let reply: TemplateReply;
    try {
      reply = await queue.runPrepared(job, { tenant: workspaceId });
    } catch (error) {
      if (error instanceof WorkerBudgetError) throw refused('time');
      // Its thread was ended and is replaced, as when the time limit stops it.
      if (error instanceof WorkerOutOfMemoryError) throw refused('memory');
      // Not the caller's template: the log says why (the first failure, at error).
      if (error instanceof WorkerStartError) throw new RelayError('service_unavailable', 'templates are unavailable: no template thread could start; retry in 5 seconds', { retryAfterSeconds: 5 });
      if (error instanceof WorkerWaitError) {
        throw new RelayError('service_unavailable', `templates are busy: this request waited ${this.maxWaitMs / 1000} s for a template thread; retry in 1 second`, { retryAfterSeconds: 1 });
      }
      if (error instanceof WorkerQueueFullError) throw new RelayError('service_unavailable', 'templates are busy: retry in 1 second', { retryAfterSeconds: 1 });
      throw error;
    }
    if ('refused' in reply) throw new RelayError(reply.refused.code, reply.refused.message);
    return reply;
  }
}
