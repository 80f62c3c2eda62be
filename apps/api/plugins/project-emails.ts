// A project's emails for its members (dashboard session): the same list and detail as
// GET /v1/emails[/{id}] answer an email:read key of the project, plus the message itself
// while it is retained, as JSON and, for the dashboard's message view to frame, its HTML part
// alone under a policy that sandboxes it and lets it run nothing and fetch nothing.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { forbidden, notFound } from '../../../domain/errors.ts';
import { emailMessage } from '../../services/email-content.ts';
import { getEmail, listEmails } from '../../services/email-reads.ts';
import { requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { EmailDetail, EmailList, EmailMessage } from './email-responses.schemas.ts';
import { detailOf, summaryOf } from './emails.ts';
import { DocumentedListEmailsQuery, IdParam, ListEmailsQuery } from './emails.schemas.ts';
import { NoQuery } from './query.schemas.ts';
import { Id } from './management-schemas.ts';

const ByProject = Type.Object({ projectId: Id });
const ByEmail = Type.Object({ projectId: Id, emailId: IdParam.properties.id });
const HtmlQuery = Type.Object(
  { remote_images: Type.Optional(Type.Union([Type.Literal('on'), Type.Literal('off')], { errorMessage: 'must be on or off' })) },
  { additionalProperties: false },
);

/**
 * The HTML part's own policy (issue 25): nothing runs, nothing is fetched but data: images
 * (remote ones only when the reader asks), no form goes anywhere, and only the dashboard may
 * frame it. `sandbox` makes the document sandboxed (an opaque origin, no scripts, no meta
 * refresh or other navigation of its own) wherever it is opened, not only inside the
 * dashboard's <iframe sandbox>: a member who follows a link straight to it, from anywhere,
 * carries the session cookie (SameSite=Lax rides on top-level GETs). Its one allowance is the
 * reader's click on a link (LINKS_IN_NEW_TABS): a new tab, outside the sandbox so that the
 * linked page works; it gets no referrer (Referrer-Policy) and no opener (the implied noopener
 * of target=_blank, and the dashboard's Cross-Origin-Opener-Policy for a frame of another
 * origin, which covers rel=opener).
 */
export function messageCsp(remoteImages: boolean): string {
  return [
    "default-src 'none'", `img-src data:${remoteImages ? ' https: http:' : ''}`, "style-src 'unsafe-inline'",
    "frame-ancestors 'self'", "form-action 'none'", "base-uri 'none'", 'sandbox allow-popups allow-popups-to-escape-sandbox',
  ].join('; ');
}

/**
 * A link in the part opens in a new tab: navigating the frame itself would take it to an origin
 * the dashboard's frame-src refuses. Without an href the base element is not governed by
 * base-uri. javascript: links stay dead (no script runs here, and default-src 'none'); a data:
 * one, where a browser opens it at all, is an opaque origin with no opener, as any site is.
 */
const LINKS_IN_NEW_TABS = '<base target="_blank">';

/** The white space of `\s` (what a prolog may hold before the doctype, as the parser reads it loosely). */
const isSpace = (code: number): boolean =>
  (code >= 0x09 && code <= 0x0d) || code === 0x20 || code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a)
  || code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff;

/**
 * Where the prolog ends: what may precede the doctype while the parser is still in its initial
 * mode (white space, comments, an <?xml …?>), and the doctype. The base element goes after it, as
 * an element before the doctype would have the doctype ignored and the part rendered in quirks
 * mode; the first base with a target wins, so a target of the sender's own base comes too late.
 * A scan, not a regular expression: a part may begin with millions of spaces, and a repeated
 * group keeps a backtrack entry per repetition until V8's stack gives out.
 */
/** A comment's end: the first --> or --!> (one search from where the comment starts, so the scan stays linear). */
const COMMENT_END = /--!?>/g;

export function prologEnd(html: string): number {
  let at = 0;
  for (;;) {
    while (at < html.length && isSpace(html.charCodeAt(at))) at++;
    if (html.startsWith('<!--', at)) {
      // <!--> and <!---> end at once, as the parser ends them; any other at the first --> or --!>.
      if (html.startsWith('>', at + 4)) { at += 5; continue; }
      if (html.startsWith('->', at + 4)) { at += 6; continue; }
      COMMENT_END.lastIndex = at + 4;
      const end = COMMENT_END.exec(html);
      if (!end) break;
      at = end.index + end[0].length;
    } else if (html.startsWith('<?', at)) {
      const end = html.indexOf('>', at + 2);
      if (end < 0) break;
      at = end + 1;
    } else {
      break;
    }
  }
  if (html.slice(at, at + 9).toLowerCase() === '<!doctype') {
    const end = html.indexOf('>', at + 9);
    if (end >= 0) at = end + 1;
  }
  return at;
}

/**
 * Elements that load a document of their own. The policy refuses their loads, but Chromium opens
 * the connection for a frame before frame-src refuses it: the sender's server would learn that,
 * when and from where a member read the message, with remote images blocked. Renamed, they are
 * unknown elements that load nothing. The tag name is matched as the tokenizer reads it (a
 * literal name, any case); text that merely looks like one (in an attribute, a <textarea>) only
 * reads differently in this view. The stored message is unchanged.
 */
const FRAMING_TAGS = /<(\/?)(iframe|frameset|frame|object|embed|portal|fencedframe)(?=[\s/>]|$)/gi;

export const inertFrames = (html: string): string => html.replace(FRAMING_TAGS, '<$1relay-inert-$2');

function framedMessageHtml(html: string): string {
  const inert = inertFrames(html);
  const at = prologEnd(inert);
  return `${inert.slice(0, at)}${LINKS_IN_NEW_TABS}${inert.slice(at)}`;
}

/**
 * The dashboard only ever frames the HTML part; a browser that says it is opening it as a page
 * of its own is refused, so the sender's HTML never stands at a dashboard address. Browsers
 * send Sec-Fetch-Dest only to trustworthy origins (https, localhost), so this narrows what the
 * policy above already makes harmless rather than replacing it.
 */
const openedAsPage = (headers: Record<string, string | string[] | undefined>) => headers['sec-fetch-dest'] === 'document';

export async function projectEmailRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));
  const scopeOf = (projectId: string) => ({ projectId, apiKeyId: null });

  app.get<{ Params: Static<typeof ByProject>; Querystring: ListEmailsQuery }>('/v1/projects/:projectId/emails', {
    schema: { params: ByProject, querystring: ListEmailsQuery },
    config: { openapi: { summary: 'The project\'s emails, newest first, with the filters and paging of GET /v1/emails (members).', query: DocumentedListEmailsQuery, responses: { 200: { description: 'A page of emails.', schema: EmailList } } } },
  }, async (request) => {
    const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
    const query = request.query;
    const { items, nextCursor } = await listEmails(ctx.documents, ctx.events, scopeOf(project._id), {
      ...query,
      limit: query.limit === undefined ? undefined : Number(query.limit),
    });
    return { emails: items.map(summaryOf), next_cursor: nextCursor };
  });

  app.get<{ Params: Static<typeof ByEmail> }>('/v1/projects/:projectId/emails/:emailId', {
    schema: { params: ByEmail, querystring: NoQuery },
    config: { openapi: { summary: 'One email of the project, as GET /v1/emails/{id} answers it (members).', responses: { 200: { description: 'The email.', schema: EmailDetail } } } },
  }, async (request) => {
    const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
    return detailOf(await getEmail(ctx.documents, ctx.events, scopeOf(project._id), request.params.emailId));
  });

  app.get<{ Params: Static<typeof ByEmail> }>('/v1/projects/:projectId/emails/:emailId/message', {
    schema: { params: ByEmail, querystring: NoQuery },
    config: { openapi: { summary: 'The message as admitted: addresses, the sender\'s headers, the HTML and text parts (410 content_expired after retention; BCC never).', responses: { 200: { description: 'The message.', schema: EmailMessage } } } },
  }, async (request, reply) => {
    const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
    const message = await emailMessage(ctx.documents, ctx.events, ctx.services.secrets, project._id, request.params.emailId, ctx.now());
    return reply.header('cache-control', 'private, no-store').send(message);
  });

  app.get<{ Params: Static<typeof ByEmail>; Querystring: Static<typeof HtmlQuery> }>('/v1/projects/:projectId/emails/:emailId/message.html', {
    schema: { params: ByEmail, querystring: HtmlQuery },
    config: { openapi: { summary: 'The HTML part alone, under a Content-Security-Policy that runs nothing and fetches no remote image unless remote_images=on.', responses: { 200: { description: 'The HTML part.', mediaType: 'text/html' } } } },
  }, async (request, reply) => {
    if (openedAsPage(request.headers)) throw forbidden('the HTML part is shown inside the dashboard\'s message page, not as a page of its own');
    const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
    const message = await emailMessage(ctx.documents, ctx.events, ctx.services.secrets, project._id, request.params.emailId, ctx.now());
    if (message.html === null) throw notFound(`email ${message.id} has no HTML part`);
    return reply.headers({
      'content-security-policy': messageCsp(request.query.remote_images === 'on'),
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': 'private, no-store',
    }).type('text/html; charset=utf-8').send(framedMessageHtml(message.html));
  });
}
