// Management names are "1–100 characters after trimming" (MANAGEMENT-API.md), counted in
// Unicode code points (INTERFACE-DECISIONS.md, Lengths: "an emoji is one character, not two
// UTF-16 units"), by both the Name schema and normalizeName: a 60-character name of astral
// characters (120 UTF-16 units) is accepted for a workspace, a project and an API key.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp; owner: Caller }
const test = suite<Ctx>('names count characters, not UTF-16 units');
test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.owner = await newCaller(ctx.t, 'owner@names.test');
});
test.after(async (ctx) => { await ctx.t.close(); });

test('a 60-character name of astral characters is accepted for a workspace, a project and an API key', async ({ t, owner }) => {
  const { workspaceId, projectId } = await workspaceWithProject(t, owner);
  const name = '𠀀'.repeat(60); // U+20000, 60 characters, 120 UTF-16 units
  assert.is([...name].length, 60);
  const workspace = await call(t, 'POST', '/v1/workspaces', { as: owner, body: { name } });
  const project = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name, environment: 'development' } });
  const key = await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name, permissions: ['email:send'] } });
  assert.equal(
    { workspace: workspace.statusCode, project: project.statusCode, key: key.statusCode },
    { workspace: 201, project: 201, key: 201 },
    `project: ${project.body}`,
  );
});

test.run();
