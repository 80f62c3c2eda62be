// The label /metrics counts a webhook attempt under (relay_webhook_attempts_total, apps/relay-metrics.ts):
// bounded, whatever an endpoint answers.

/**
 * Webhook attempt results: 2xx, 3xx, 4xx, 5xx (by the status class), or the attempt's error code
 * when no status came back: timeout, connection_refused, connection_reset, tls_error,
 * dns_failure, unsafe_destination, network_error; signing_failed for an attempt whose endpoint's
 * secret could not be opened; endpoint_disabled, endpoint_deleted and endpoint_unsubscribed
 * (its event type no longer subscribed to) for a delivery closed without a request.
 */
export const WEBHOOK_RESULT_LABELS = [
  '2xx', '3xx', '4xx', '5xx', 'timeout', 'connection_refused', 'connection_reset', 'tls_error', 'dns_failure',
  'unsafe_destination', 'network_error', 'signing_failed', 'endpoint_disabled', 'endpoint_deleted',
  'endpoint_unsubscribed',
] as const;
export type WebhookResultLabel = (typeof WEBHOOK_RESULT_LABELS)[number];

const BY_ERROR_CODE: ReadonlySet<string> = new Set(WEBHOOK_RESULT_LABELS.filter((label) => !label.endsWith('xx')));

/** The label of a webhook attempt's result, from its status or error code. */
export function webhookResultOf(httpStatus: number | null, errorCode: string | null): WebhookResultLabel {
  if (httpStatus !== null && httpStatus >= 200 && httpStatus < 600) return `${Math.floor(httpStatus / 100)}xx` as WebhookResultLabel;
  return errorCode !== null && BY_ERROR_CODE.has(errorCode) ? errorCode as WebhookResultLabel : 'network_error';
}
