// Saved templates of a project: one document each in COLLECTIONS.templates. Two rules settle
// races without locks: the unique index (projectId, slug) lets one of two creates (or renames)
// with one slug win; the store's compare-and-set on `_v` lets one of two edits from the same
// revision win. `revision` is the document's version: 1 on create, +1 on each edit.
//
// A project has at most MAX_TEMPLATES_PER_PROJECT templates, also when creations race (in any
// number of processes): each template holds one of the project's slots (../slots.ts), which its
// deletion frees.
import { conflict, notFound } from '../../../domain/errors.ts';
import { checkRevision, templateContentOf, type TemplateContent } from '../../../domain/templates/content.ts';
import { DuplicateKeyError, type DocumentStore, type Stored } from '../../../infra/ports/document-store.ts';
import type { WorkspaceTemplates } from '../../../infra/rendering/template-threads.ts';
import { COLLECTIONS } from '../collections.ts';
import { claimHeldSlot, freeHeldSlot, insertHoldingSlot, type HeldSlot, type SlotHolder } from '../slots.ts';
import { newTemplateId } from './template-ids.ts';

/** A project's templates, at most: deleting one makes room for another. */
export const MAX_TEMPLATES_PER_PROJECT = 1000;

export interface TemplateDocument extends TemplateContent, SlotHolder {
  _id: string;
  projectId: string;
  revision: number;
  /** Every variable subject, html and text use, found when the content was written. */
  variables: string[];
  createdAt: string;
  updatedAt: string;
}

export const templatesOf = (documents: DocumentStore) => documents.collection<TemplateDocument>(COLLECTIONS.templates);
const slotsOf = (documents: DocumentStore) => documents.collection<HeldSlot>(COLLECTIONS.templateSlots);

export async function ensureTemplateIndexes(documents: DocumentStore): Promise<void> {
  await templatesOf(documents).ensureIndexes([
    { name: 'project_slug', fields: [['projectId', 'asc'], ['slug', 'asc']], unique: true },
    { name: 'project_id', fields: [['projectId', 'asc'], ['_id', 'desc']] },
  ]);
}

export interface TemplateSummaryView {
  id: string;
  projectId: string;
  name: string;
  slug: string;
  subject: string;
  revision: number;
  variables: string[];
  createdAt: string;
  updatedAt: string;
}

export interface TemplateView extends TemplateSummaryView {
  html: string | null;
  text: string | null;
}

export const templateSummaryView = (t: TemplateDocument): TemplateSummaryView => ({
  id: t._id,
  projectId: t.projectId,
  name: t.name,
  slug: t.slug,
  subject: t.subject,
  revision: t.revision,
  variables: t.variables,
  createdAt: t.createdAt,
  updatedAt: t.updatedAt,
});

export const templateView = (t: TemplateDocument): TemplateView => ({ ...templateSummaryView(t), html: t.html, text: t.text });

export interface TemplateBody {
  name: string;
  slug: string;
  subject: string;
  html?: string | null;
  text?: string | null;
}

/** Names the field first, as the refusals of a template's other fields do, so that a form can tie it to its Slug field. */
const slugTaken = (slug: string) => conflict(`body.slug: "${slug}" is already used by another template of this project`);

/** Content checks and the variables it uses; 400 when the content is not a valid template or no send of it could render (CompiledTemplate.rehearse). */
async function prepareContent(threads: WorkspaceTemplates, body: TemplateBody) {
  const content = templateContentOf(body);
  const compiled = await threads.compile(content, 'body');
  return { content, compiled };
}

export async function createTemplate(documents: DocumentStore, threads: WorkspaceTemplates, projectId: string, body: TemplateBody, now: Date): Promise<Stored<TemplateDocument>> {
  const { content, compiled } = await prepareContent(threads, body);
  const at = now.toISOString();
  const id = newTemplateId(now);
  const slot = await claimTemplateSlot(documents, projectId, id, now);
  if (slot === null) throw conflict(`a project has at most ${MAX_TEMPLATES_PER_PROJECT} templates; delete one to make room`);
  const doc: TemplateDocument = {
    _id: id,
    projectId,
    ...content,
    revision: 1,
    variables: compiled.variables,
    slot,
    createdAt: at,
    updatedAt: at,
  };
  try {
    return await insertHoldingSlot(slotsOf(documents), slot, id, () => templatesOf(documents).insert(doc));
  } catch (error) {
    if (error instanceof DuplicateKeyError) throw slugTaken(content.slug);
    throw error;
  }
}

/**
 * Claims a free slot of the project for `templateId`: its id, or null when the project has its
 * MAX_TEMPLATES_PER_PROJECT templates. Templates made before slots existed hold none: they take
 * as many slots off the end of the range (their number never grows).
 */
async function claimTemplateSlot(documents: DocumentStore, projectId: string, templateId: string, now: Date): Promise<string | null> {
  const unslotted = await templatesOf(documents).count({ projectId, slot: null });
  return claimHeldSlot(slotsOf(documents), projectId, MAX_TEMPLATES_PER_PROJECT - unslotted, templateId, now,
    (ids) => templatesOf(documents).find({ where: { _id: { in: ids } }, fields: ['slot'] }));
}

/** The template, if it is one of this project's; a template of another project is not found. */
export async function findTemplate(documents: DocumentStore, projectId: string, id: string): Promise<Stored<TemplateDocument> | null> {
  const template = await templatesOf(documents).get(id);
  return template && template.projectId === projectId ? template : null;
}

export async function getTemplate(documents: DocumentStore, projectId: string, id: string): Promise<Stored<TemplateDocument>> {
  const template = await findTemplate(documents, projectId, id);
  if (!template) throw notFound(`template ${id} not found in this project`);
  return template;
}

export async function findTemplateBySlug(documents: DocumentStore, projectId: string, slug: string): Promise<Stored<TemplateDocument> | null> {
  const [template] = await templatesOf(documents).find({ where: { projectId, slug }, limit: 1 });
  return template ?? null;
}

/** Newest first; the cursor is the last id of the previous page. */
export async function listTemplates(
  documents: DocumentStore,
  projectId: string,
  page: { limit: number; cursor?: string },
): Promise<{ templates: Array<Stored<TemplateDocument>>; nextCursor: string | null }> {
  const found = await templatesOf(documents).find({
    where: { projectId },
    orderBy: [['projectId', 'asc'], ['_id', 'desc']],
    after: page.cursor === undefined ? undefined : { projectId, _id: page.cursor },
    limit: page.limit + 1,
  });
  const more = found.length > page.limit;
  const templates = more ? found.slice(0, page.limit) : found;
  return { templates, nextCursor: more ? templates[templates.length - 1]._id : null };
}

/**
 * Replaces the content, from `revision` only: compare-and-set on the version it names, so of
 * two edits from one revision exactly one is applied and the other is told it is stale.
 */
export async function updateTemplate(
  documents: DocumentStore,
  threads: WorkspaceTemplates,
  projectId: string,
  id: string,
  body: TemplateBody & { revision: number },
  now: Date,
): Promise<Stored<TemplateDocument>> {
  const { content, compiled } = await prepareContent(threads, body);
  const current = await getTemplate(documents, projectId, id);
  checkRevision(current.revision, body.revision);
  const next: TemplateDocument = {
    _id: current._id,
    projectId: current.projectId,
    ...content,
    revision: body.revision + 1,
    variables: compiled.variables,
    ...(current.slot === undefined ? {} : { slot: current.slot }),
    createdAt: current.createdAt,
    updatedAt: now.toISOString(),
  };
  let stored: Stored<TemplateDocument> | null;
  try {
    stored = await templatesOf(documents).replace(next, body.revision);
  } catch (error) {
    if (error instanceof DuplicateKeyError) throw slugTaken(content.slug);
    throw error;
  }
  if (!stored) {
    const fresh = await findTemplate(documents, projectId, id);
    if (!fresh) throw notFound(`template ${id} not found in this project`);
    checkRevision(fresh.revision, body.revision);
    // The version matched on a fresh read but not in the write: someone wrote in between.
    throw conflict(`revision ${body.revision} is stale: the template was changed meanwhile`);
  }
  return stored;
}

/** Deletes the template and frees its slot. */
export async function deleteTemplate(documents: DocumentStore, projectId: string, id: string): Promise<void> {
  const template = await getTemplate(documents, projectId, id);
  if (!(await templatesOf(documents).delete(id))) throw notFound(`template ${id} not found in this project`);
  if (template.slot !== undefined) await freeHeldSlot(slotsOf(documents), template.slot, id);
}
