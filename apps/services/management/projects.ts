// Projects: the unit API keys, templates and sending are scoped to. The environment is
// fixed at creation: it decides the key prefix and whether delivery is restricted.
import type { Environment, Project } from '../../../domain/management.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { insertUnique } from './documents.ts';
import { newId } from './ids.ts';
import { normalizeName } from './names.ts';

export const projectsOf = (documents: DocumentStore) => documents.collection<Project>(COLLECTIONS.projects);

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
  return insertUnique(
    projectsOf(documents),
    { _id: newId('prj'), workspaceId: input.workspaceId, name, environment: input.environment, createdAt: now.toISOString() },
    `a project named "${name}" already exists in this workspace`,
  );
}

export async function findProjectByName(documents: DocumentStore, workspaceId: string, name: string): Promise<Project | null> {
  const [project] = await projectsOf(documents).find({ where: { workspaceId, name: name.trim() }, limit: 1 });
  return project ?? null;
}

export async function listProjects(documents: DocumentStore, workspaceId: string): Promise<Project[]> {
  return projectsOf(documents).find({ where: { workspaceId }, orderBy: [['workspaceId', 'asc'], ['name', 'asc']] });
}
