// The process's compiled templates, shared by template sends: compiled once per revision.
import { CompiledTemplateCache } from '../../../infra/rendering/compiled-template-cache.ts';
import { compileTemplate, type CompiledTemplate, type TemplateSource } from '../../../infra/rendering/template-renderer.ts';

export const compiledTemplates = new CompiledTemplateCache(500);

export function compiledTemplateOf(template: TemplateSource & { _id: string; revision: number }): Promise<CompiledTemplate> {
  return compiledTemplates.get(template._id, template.revision, () => compileTemplate(template, 'template'));
}

/** A revision compiled while it was being written is kept for the sends that follow. */
export function rememberCompiled(id: string, revision: number, compiled: CompiledTemplate): void {
  void compiledTemplates.get(id, revision, async () => compiled);
}
