// Answers that show a secret once (an API key, a webhook signing secret, the session cookie)
// must not be kept by any cache on the way or in the browser: the one copy is the caller's.
import type { FastifyReply } from 'fastify';

export const showsSecret = (reply: FastifyReply): FastifyReply => reply.header('cache-control', 'no-store');
