// Every failure a client can be told about has one code here. The HTTP status for each
// code lives in one place: apps/api/error-registry.ts.

export type ErrorCode =
  | 'validation_error'
  | 'invalid_api_key'
  | 'session_required'
  | 'invalid_credentials'
  | 'forbidden'
  | 'origin_not_allowed'
  | 'production_not_enabled'
  | 'not_found'
  | 'content_expired'
  | 'conflict'
  | 'idempotency_conflict'
  | 'message_too_large'
  | 'domain_not_verified'
  | 'sender_not_allowed'
  | 'test_recipient_not_allowed'
  | 'invalid_template_variables'
  | 'unsafe_destination'
  | 'request_timeout'
  | 'headers_too_large'
  | 'http_version_not_supported'
  | 'expectation_failed'
  | 'unsupported_content_encoding'
  | 'rate_limit_exceeded'
  | 'quota_exceeded'
  | 'service_unavailable'
  | 'internal_error';

export class RelayError extends Error {
  readonly code: ErrorCode;
  /** Extra facts for the transport layer (e.g. retryAfterSeconds); never shown verbatim. */
  readonly details: Record<string, unknown>;
  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = 'RelayError';
    this.code = code;
    this.details = details;
  }
}

export const validationError = (message: string) => new RelayError('validation_error', message);
export const notFound = (message: string) => new RelayError('not_found', message);
export const conflict = (message: string) => new RelayError('conflict', message);
export const forbidden = (message: string) => new RelayError('forbidden', message);
