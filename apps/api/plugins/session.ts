// Dashboard sign-in: POST /v1/session sets the session cookie, DELETE ends the session,
// GET tells the dashboard who is signed in and where. Wrong sign-ins are throttled per account
// and per client address: 429 rate_limit_exceeded with Retry-After while a key must wait.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { RelayError } from '../../../domain/errors.ts';
import { PASSWORD_MAX_LENGTH, SESSION_MAX_MS, type User } from '../../../domain/management.ts';
import type { RelayConfig } from '../../../infra/config.ts';
import { createSession, endSession } from '../../services/management/sessions.ts';
import { beginSignIn } from '../../services/management/sign-in-throttle.ts';
import { authenticateUser, userView } from '../../services/management/users.ts';
import { listWorkspacesOf } from '../../services/management/workspaces.ts';
import { authenticateSession, checkOrigin, requireSession, sessionCookieName } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { showsSecret } from '../secret-answers.ts';
import { SessionView, SignedIn, SignedOut } from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';
import { Text } from './text.schemas.ts';

const Login = Type.Object(
  // The password's length in characters, as domain/management.ts passwordProblem counts it: any
  // password that could be set can sign in.
  { email: Type.String({ minLength: 1, maxLength: 254 }), password: Text({ minLength: 1, maxLength: PASSWORD_MAX_LENGTH, errorMessage: `must be 1 to ${PASSWORD_MAX_LENGTH} characters` }) },
  { additionalProperties: false },
);

/**
 * Secure whenever the dashboard is served over https, whatever the environment: a browser
 * must never send the session over plain http to an https dashboard. Production always (its
 * __Host- name requires it); a plain-http origin outside production goes without, so that a
 * dashboard on http://localhost can sign in at all.
 */
export const sessionCookieSecure = (config: Pick<RelayConfig, 'env' | 'dashboardOrigin'>): boolean =>
  config.env === 'production' || new URL(config.dashboardOrigin).protocol === 'https:';

export async function sessionRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  const cookieName = sessionCookieName(ctx.config);
  const cookieOptions = {
    path: '/',
    httpOnly: true,
    // Lax, not Strict: a link into the dashboard from a mail should arrive signed in.
    sameSite: 'lax' as const,
    secure: sessionCookieSecure(ctx.config),
  };

  app.post<{ Body: Static<typeof Login> }>('/v1/session', {
    // No key is needed here, so large bodies must not be able to take the body budget.
    bodyLimit: 16 * 1024,
    // The Origin check runs before the body is even read: login CSRF is refused like any other.
    onRequest: async (request) => checkOrigin(ctx.config, request),
    schema: { querystring: NoQuery, body: Login },
    // Signing in is what needs no session.
    config: {
      openapi: {
        security: 'none',
        responses: { 200: { description: 'Signed in: the session cookie is set (rr_session; __Host-rr_session with RELAY_ENV=production).', schema: SignedIn } },
        failures: { 429: { description: 'rate_limit_exceeded: too many failed sign-ins for this account or client address; the message says how long to wait.', headers: ['Retry-After'] } },
      },
    },
  }, async (request, reply) => {
    // Throttled per account and per client address before any other work (apps/services/management/sign-in-throttle.ts).
    const attempt = await beginSignIn(ctx.documents, { email: request.body.email, address: request.ip }, ctx.now);
    let user: User;
    try {
      user = await authenticateUser(ctx.documents, request.body.email, request.body.password);
    } catch (error) {
      if (!(error instanceof RelayError && error.code === 'invalid_credentials')) await attempt.abandoned();
      throw error;
    }
    await attempt.succeeded();
    const { token, session } = await createSession(ctx.documents, user._id, ctx.now());
    reply.setCookie(cookieName, token, { ...cookieOptions, maxAge: Math.floor(SESSION_MAX_MS / 1000) });
    return showsSecret(reply).status(200).send({ user: userView(user), expiresAt: session.expiresAt });
  });

  // The session before the query (MANAGEMENT-API.md, Order of checks): an anonymous caller learns nothing of schemas.
  app.get('/v1/session', {
    onRequest: requireSession(ctx),
    schema: { querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'Who is signed in, and their workspaces.', schema: SessionView } } } },
  }, async (request) => {
    const { user, session } = await authenticateSession(ctx, request);
    const workspaces = await listWorkspacesOf(ctx.documents, user._id);
    return {
      user: userView(user),
      expiresAt: session.expiresAt,
      memberships: workspaces.map((w) => ({ workspaceId: w.id, workspaceName: w.name, role: w.role, activated: w.activated })),
    };
  });

  // Checked before the body is read, as on every other route that needs a session.
  app.delete('/v1/session', {
    onRequest: requireSession(ctx),
    schema: { querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'Signed out: this session ended, its cookie cleared.', schema: SignedOut } } } },
  }, async (request, reply) => {
    const { session } = await authenticateSession(ctx, request);
    await endSession(ctx.documents, session._id);
    reply.clearCookie(cookieName, cookieOptions);
    return { signedOut: true };
  });
}
