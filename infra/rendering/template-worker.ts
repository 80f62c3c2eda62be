// A template thread (./template-threads.ts): compiles (MJML, handlebars), renders and sanitizes
// on its own event loop, and keeps the compiled templates it rendered for sends, by id and
// revision. A refusal (a RelayError) goes back as data, since an error loses its fields on the
// way between threads.
import { RelayError } from '../../domain/errors.ts';
import type { TemplateVariables } from '../../domain/templates/variables.ts';
import { workerTask } from '../threads/worker-queue.ts';
import { CompiledTemplateCache } from './compiled-template-cache.ts';
import { compileTemplate, type CompiledTemplate, type RenderedEmail, type TemplateSource } from './template-renderer.ts';

export type TemplateJob =
  /** Compiles a template being saved and rehearses a send of it: its variables, or its refusal. */
  | { op: 'compile'; source: TemplateSource; prefix: string }
  /** Compiles and renders, keeping nothing: a preview. */
  | { op: 'preview'; source: TemplateSource; values: TemplateVariables; prefix: string; variablesField: string }
  /** Renders a saved revision; its source comes along only when the thread said it lacks it. */
  | { op: 'render'; key: { id: string; revision: number }; source?: TemplateSource; values: TemplateVariables; variablesField: string };

export type TemplateReply =
  | { variables: string[]; mjml: boolean; rendered?: RenderedEmail }
  | { missing: true }
  | { refused: { code: RelayError['code']; message: string } };

/**
 * The most heap (estimated: CompiledTemplate.estimatedBytes) the templates kept for sends may
 * hold: 128 MiB. Typical templates (tens of KB, tens of variables) estimate at 100 to 300 KB,
 * so the 500 most recently sent fit; a 200,000-character template of 40,000 variables keeps
 * about 50 MB (estimated 61 MB): two of those nearly fill it. It leaves most of the thread's heap
 * (TEMPLATE_THREAD_HEAP_MB, ./template-threads.ts) to the job under way.
 */
const COMPILED_CACHE_BUDGET_BYTES = 128 * 1024 * 1024;

const cache = new CompiledTemplateCache(500, COMPILED_CACHE_BUDGET_BYTES);

/** Values arrive as plain objects: give them back the prototype-free shape checkTemplateVariables made. */
const prototypeFree = (values: TemplateVariables): TemplateVariables => Object.assign(Object.create(null) as TemplateVariables, values);

async function handle(job: TemplateJob): Promise<TemplateReply> {
  let compiled: CompiledTemplate;
  if (job.op === 'render') {
    const { id, revision } = job.key;
    if (!cache.has(id, revision) && !job.source) return { missing: true };
    compiled = await cache.get(id, revision, () => compileTemplate(job.source!, 'template', 'stored'));
  } else {
    compiled = await compileTemplate(job.source, job.prefix);
    if (job.op === 'compile') compiled.rehearse();
  }
  const rendered = job.op === 'compile' ? undefined : compiled.render(prototypeFree(job.values), job.variablesField);
  return { variables: compiled.variables, mjml: compiled.mjml, ...(rendered ? { rendered } : {}) };
}

export default workerTask<TemplateJob, TemplateReply>(async (job) => {
  try {
    return await handle(job);
  } catch (error) {
    if (error instanceof RelayError) return { refused: { code: error.code, message: error.message } };
    throw error;
  }
});
