// A Relay for the dashboard's browser tests: the real API (and, when asked, every processor)
// listening on a free port, its dashboard origin http://localhost:<port>, with a user who owns a
// workspace, a development project, a verified domain connected to it and an API key; and
// helpers that act as that person does, through the page.
import type { Page } from 'playwright-core';
import { createApiKey } from '../../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../../apps/services/management/domains.ts';
import { createProject } from '../../apps/services/management/projects.ts';
import { createUser } from '../../apps/services/management/users.ts';
import { createWorkspace } from '../../apps/services/management/workspaces.ts';
import { startTestApp, type TestApp, type TestAppOptions } from './app.ts';
import { PASSWORD } from './management.ts';
import { freePort } from './relay-process.ts';

export interface DashboardFixture {
  t: TestApp;
  /** http://localhost:<port>: RELAY_DASHBOARD_ORIGIN. */
  origin: string;
  port: number;
  owner: { email: string; password: string; userId: string };
  workspaceId: string;
  projectId: string;
  domain: string;
  domainId: string;
  /** A development key of the project (email:send, email:read). */
  apiKey: string;
  close(): Promise<void>;
}

let people = 0;

export async function startDashboard(env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<DashboardFixture> {
  const port = await freePort();
  const origin = `http://localhost:${port}`;
  const t = await startTestApp({ PORT: String(port), RELAY_DASHBOARD_ORIGIN: origin, ...env }, { ...options, listen: true, port });
  const documents = t.ctx.documents;
  const now = t.ctx.now();
  const email = `owner${++people}@dash.example.test`;
  const user = await createUser(documents, { email, password: PASSWORD }, now);
  const { workspace } = await createWorkspace(documents, user, 'Acme', now);
  const project = await createProject(documents, { workspaceId: workspace._id, name: 'Storefront', environment: 'development' }, now);
  const domain = await createDomain(documents, { workspaceId: workspace._id, name: 'dash.example.test' }, now, t.ctx.services.secrets);
  await markDomainVerified(documents, domain._id, 'dashboard test fixture', now);
  await connectDomain(documents, domain._id, project._id);
  const { secret } = await createApiKey(documents, { project, name: 'Backend', permissions: ['email:send', 'email:read'] }, now);
  return {
    t, origin, port,
    owner: { email, password: PASSWORD, userId: user._id },
    workspaceId: workspace._id, projectId: project._id, domain: domain.name, domainId: domain._id, apiKey: secret,
    close: () => t.close(),
  };
}

/** POST /v1/emails with the fixture's key, as a backend would; the new email's id. */
export async function sendEmail(f: DashboardFixture, body: Record<string, unknown>): Promise<string> {
  const response = await fetch(`${f.t.url}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: `Shop <shop@${f.domain}>`, to: [`buyer@${f.domain}`], subject: 'Your order', text: 'Thanks!', ...body }),
  });
  if (response.status !== 202) throw new Error(`POST /v1/emails: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

/** Signs in through the sign-in page and waits for the page it leads to. */
export async function signIn(page: Page, f: DashboardFixture, who: { email: string; password: string } = f.owner, path = '/sign-in'): Promise<void> {
  await page.goto(`${f.origin}${path}`);
  await page.getByLabel('Email').fill(who.email);
  await page.getByLabel('Password').fill(who.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => url.pathname !== '/sign-in' && url.pathname !== '/');
}

/** A session cookie of the fixture's owner ("rr_session=…"), for reading through the API what a page shows. */
export async function ownerCookie(f: DashboardFixture): Promise<string> {
  const response = await fetch(`${f.t.url}/v1/session`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: f.owner.email, password: f.owner.password }),
  });
  return response.headers.getSetCookie()[0].split(';')[0];
}
