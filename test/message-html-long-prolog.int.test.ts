// GET /v1/projects/{p}/emails/{e}/message.html puts its <base target="_blank"> after the part's
// prolog: a part the send accepted (202) that begins with millions of spaces is served (200), not
// a 500 from a pattern whose backtracking outgrew V8's stack.
import * as assert from 'uvu/assert';
import { suite } from 'uvu';
import { ownerCookie, sendEmail, startDashboard, type DashboardFixture } from './support/dashboard.ts';

const test = suite<{ f: DashboardFixture; cookie: string }>('message.html of a part with a long prolog');

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.cookie = await ownerCookie(ctx.f);
});
test.after(async (ctx) => {
  await ctx.f?.close();
});

test('a part that begins with 8.6 million spaces (a 202 send) is served, its links opening in new tabs', async ({ f, cookie }) => {
  const html = `${' '.repeat(8_600_000)}<p>Hello</p>`;
  const emailId = await sendEmail(f, { subject: 'Padded', html });
  const response = await fetch(`${f.origin}/v1/projects/${f.projectId}/emails/${emailId}/message.html`, { headers: { cookie } });
  const body = await response.text();
  assert.is(response.status, 200, `message.html answered ${response.status}: ${body.slice(0, 200)}`);
  assert.ok(body.endsWith('<base target="_blank"><p>Hello</p>'), 'the base element goes after the white space');
});

test.run();
