// Projects: the unit API keys, templates and sending are scoped to. The environment is
// fixed at creation: it decides the key prefix and whether delivery is restricted.
//
// A workspace has at most MAX_PROJECTS_PER_WORKSPACE projects, also when creations race (in any
// number of processes): each project holds one of the workspace's slots (../slots.ts). Projects
// are not deleted, so a slot is freed only when its creation failed.
import { conflict } from '../../../domain/errors.ts';
import type { Environment, Project } from '../../../domain/management.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { claimHeldSlot, insertHoldingSlot, type HeldSlot, type SlotHolder } from '../slots.ts';
import { insertUnique } from './documents.ts';
import { newId } from './ids.ts';
import { normalizeName } from './names.ts';

export const projectsOf = (documents: DocumentStore) => documents.collection<Project & SlotHolder>(COLLECTIONS.projects);
const slotsOf = (documents: DocumentStore) => documents.collection<HeldSlot>(COLLECTIONS.projectSlots);

/** A workspace's projects, at most. */
export const MAX_PROJECTS_PER_WORKSPACE = 100;

export interface ProjectView { id: string; workspaceId: string; name: string; environment: Environment; createdAt: string }

export const projectView = (project: Project): ProjectView => ({
  id: project._id, workspaceId: project.workspaceId, name: project.name, environment: project.environment, createdAt: project.createdAt,
});

export async function createProject(
  documents: DocumentStore,
  input: { workspaceId: string; name: string; environment: Environment },
  now: Date,
): Promise<Project> {
  const name = normalizeName(input.name);
  const id = newId('prj');
  const slot = await claimProjectSlot(documents, input.workspaceId, id, now);
  if (slot === null) throw conflict(`a workspace has at most ${MAX_PROJECTS_PER_WORKSPACE} projects`);
  return insertHoldingSlot(slotsOf(documents), slot, id, () => insertUnique(
    projectsOf(documents),
    { _id: id, workspaceId: input.workspaceId, name, environment: input.environment, createdAt: now.toISOString(), slot },
    `a project named "${name}" already exists in this workspace`,
  ));
}

/**
 * Claims a free slot of the workspace for `projectId`: its id, or null when the workspace has
 * its MAX_PROJECTS_PER_WORKSPACE projects. Projects made before slots existed hold none: they
 * take as many slots off the end of the range (their number never grows).
 */
async function claimProjectSlot(documents: DocumentStore, workspaceId: string, projectId: string, now: Date): Promise<string | null> {
  const unslotted = await projectsOf(documents).count({ workspaceId, slot: null });
  return claimHeldSlot(slotsOf(documents), workspaceId, MAX_PROJECTS_PER_WORKSPACE - unslotted, projectId, now,
    (ids) => projectsOf(documents).find({ where: { _id: { in: ids } }, fields: ['slot'] }));
}

export async function findProjectByName(documents: DocumentStore, workspaceId: string, name: string): Promise<Project | null> {
  const [project] = await projectsOf(documents).find({ where: { workspaceId, name: name.trim() }, limit: 1 });
  return project ?? null;
}

/** Every project of the workspace, by name: at most MAX_PROJECTS_PER_WORKSPACE (more only in a workspace that had them before the limit). */
export async function listProjects(documents: DocumentStore, workspaceId: string): Promise<Project[]> {
  return projectsOf(documents).find({ where: { workspaceId }, orderBy: [['workspaceId', 'asc'], ['name', 'asc']] });
}
