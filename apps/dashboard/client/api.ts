// Relay's HTTP API as the pages call it: the session cookie rides along (same origin), the
// browser adds the Origin the server checks on writes, and every failure becomes an ApiError
// carrying the envelope's code and message.

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

export const SESSION_ENDED = 'Your session has ended, so Relay did not do this. Sign in again with the link at the top of the page (it opens a new tab), then try again here.';

/**
 * Sends a request. A 401 session_required anywhere but sign-in goes to the sign-in page while
 * the page is loading, and once it is drawn is told to the session listener instead.
 */
export async function request(method: Method, path: string, body?: unknown): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers: body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'network_error', 'Relay could not be reached; check that it is running and try again', null);
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
