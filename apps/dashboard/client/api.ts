// Relay's HTTP API as the pages call it: the session cookie rides along (same origin), the
// browser adds the Origin the server checks on writes, every failure becomes an ApiError
// carrying the envelope's code and message, and a request that stops being answered is given up.
import { readSettings } from './context.ts';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  /** Seconds from Retry-After, when the answer had one (429). */
  readonly retryAfter: number | null;
  constructor(status: number, code: string, message: string, retryAfter: number | null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

async function errorOf(response: Response): Promise<ApiError> {
  const retryAfter = response.headers.get('retry-after');
  let code = 'http_error';
  let message = `the server answered ${response.status} ${response.statusText}`;
  try {
    const body = (await response.json()) as { error?: { code?: string; message?: string } };
    if (body.error?.code) code = body.error.code;
    if (body.error?.message) message = body.error.message;
  } catch {
    // Not the envelope (a proxy's page): the status says enough.
  }
  return new ApiError(response.status, code, message, retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) : null);
}

/** Told when the session ends under a drawn page, and when a request works again (signed in elsewhere). */
export interface SessionListener {
  ended(): void;
  resumed(): void;
}

let listener: SessionListener | null = null;
let ended = false;

/**
 * From now on a session that ends leaves the reader on the page, where what they typed stays,
 * and `session` tells them; until then (a page's first load: nothing typed yet) it leads to
 * sign-in, which brings them back here.
 */
export function keepPageWhenSessionEnds(session: SessionListener): void {
  listener = session;
}

/** Told when a request of a drawn workspace or project page finds the reader no longer a member of its workspace. */
export interface AccessListener {
  removed(): void;
}

let access: AccessListener | null = null;

/**
 * From now on a request answered that the reader is no member of the workspace (removed while
 * the page is open) is told to `listener` (a notice at the top), besides failing as it does; the
 * page's live refreshes stop on it (live.ts). Until then (a page's first load) it fails the load.
 */
export function keepPageWhenAccessEnds(listener: AccessListener): void {
  access = listener;
}

/**
 * Whether an error is the API's answer to a reader who is no member of the workspace the request
 * is about: 403 forbidden with the message of NOT_A_MEMBER (apps/api/auth/session.ts). Other 403s
 * (a role too low for a write) leave the reader a member.
 */
export function noLongerMember(error: unknown): boolean {
  return error instanceof ApiError && error.status === 403 && error.code === 'forbidden' && /\bnot a member of the workspace\b/.test(error.message);
}

export const SESSION_ENDED = 'Your session has ended, so Relay did not do this. Sign in again with the link at the top of the page (it opens a new tab), then try again here.';

let deadlineMs: number | null = null;

/**
 * The longest a request waits for its answer, or for the next part of it (settings: the API's
 * own idle timeout, after which Relay would have closed a silent connection anyway).
 */
const deadline = (): number => (deadlineMs ??= readSettings().requestDeadlineMs);

/**
 * A request given up at its deadline. A write may have reached Relay and been done, with only its
 * answer lost: the reader is told so, since doing it again could do it twice (a second key).
 */
function unanswered(method: Method): ApiError {
  const seconds = Math.round(deadline() / 1000);
  return new ApiError(0, 'network_error', method === 'GET'
    ? `Relay did not answer within ${seconds} s; try again`
    : `Relay did not answer within ${seconds} s, so this may or may not have been done: check (in another tab, to keep what you typed here) before doing it again`, null);
}

/**
 * The answer's body, read here so that the deadline covers it too: each part that arrives starts
 * it again, so a long answer that keeps coming (a message's raw source) is not cut, and one that
 * stops coming is.
 */
async function bodyOf(response: Response, progressed: () => void): Promise<Blob | null> {
  if (response.body === null) return null;
  const reader = response.body.getReader();
  const parts: BlobPart[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return new Blob(parts);
    parts.push(value);
    progressed();
  }
}

/**
 * Sends a request. A 401 session_required anywhere but sign-in goes to the sign-in page while
 * the page is loading, and once it is drawn is told to the session listener instead; a 403 that
 * the reader is no member of the workspace, once the page is drawn, to the access listener. Without a
 * deadline a connection gone silent (a proxy, a network change) would hold the form or button
 * that sent it for good, and with it what the reader typed.
 */
export async function request(method: Method, path: string, body?: unknown): Promise<Response> {
  const abort = new AbortController();
  let timer: number | undefined;
  const restart = () => {
    clearTimeout(timer);
    timer = window.setTimeout(() => abort.abort(), deadline());
  };
  restart();
  let response: Response;
  try {
    const answer = await fetch(path, {
      method,
      headers: body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      signal: abort.signal,
    });
    response = new Response(await bodyOf(answer, restart), { status: answer.status, statusText: answer.statusText, headers: answer.headers });
  } catch {
    if (abort.signal.aborted) throw unanswered(method);
    throw new ApiError(0, 'network_error', 'Relay could not be reached; check that it is running and try again', null);
  } finally {
    clearTimeout(timer);
  }
  if (response.ok) {
    if (ended) {
      ended = false;
      listener?.resumed();
    }
    return response;
  }
  const error = await errorOf(response);
  if (error.code === 'session_required' && location.pathname !== '/sign-in') {
    if (!listener) toSignIn();
    else {
      ended = true;
      listener.ended();
      throw new ApiError(error.status, error.code, SESSION_ENDED, null);
    }
  }
  if (noLongerMember(error)) access?.removed();
  throw error;
}

export async function api<T = any>(method: Method, path: string, body?: unknown): Promise<T> {
  return (await (await request(method, path, body)).json()) as T;
}

export const get = <T = any>(path: string) => api<T>('GET', path);

/** "/v1/x" + {a: 1, b: undefined} → "/v1/x?a=1" */
export function withQuery(path: string, query: Record<string, string | number | null | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

export function toSignIn(): void {
  location.assign(withQuery('/sign-in', { next: location.pathname + location.search }));
}
