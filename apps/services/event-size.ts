// An email's event must fit in one record of the log. A record the log refuses is refused on
// every retry, and the forwarder cannot go past it (apps/pipeline/forwarder.ts): nothing admitted
// after it would be delivered, for any customer. The 10 MiB request limit does not bound the
// event: bodies travel sealed as base64 (4 bytes for 3) of their JSON, where a control
// character is 6 bytes (`\u0001`), and a template multiplies its variables (a variable of
// 10,000 characters used 200 times renders 2,000,000). So admission measures the event it is
// about to append, as the stores will write it, and refuses one over MAX_EVENT_BYTES.
//
// Measured, not bounded: the bodies' JSON is serialized once, for sealing (contentPlaintext),
// and its byte length gives the sealed size exactly; the rest of the event (addresses, subject,
// headers, tags, metadata: a few KiB at most, bounded by the send rules) is the event's data
// with the placeholder content it was decided with.
import { RelayError } from '../../domain/errors.ts';
import { MAX_EVENT_BYTES } from '../../infra/events-topic.ts';
import { sealedContentChars } from './content-vault.ts';

/**
 * What the stored event adds around its data (infra/events-topic.ts, encodeEvent): id, stream
 * id, revision, position, type, recordedAt and the metadata (a request id twice, a version),
 * a few hundred bytes; with room to spare.
 */
const STORED_EVENT_ALLOWANCE = 4096;

/**
 * The UTF-8 bytes of the email's event once stored: `data` is the decided event's data with the
 * unsealed placeholder content (empty iv, data and tag), `plaintextBytes` the length of the
 * content sealing will encrypt.
 */
export function emailEventBytes(data: unknown, plaintextBytes: number): number {
  return Buffer.byteLength(JSON.stringify(data)) + sealedContentChars(plaintextBytes) + STORED_EVENT_ALLOWANCE;
}

/** Refuses (413 message_too_large) an email whose event would not fit in one record of the log. */
export function checkEmailEventSize(data: unknown, plaintextBytes: number): void {
  const bytes = emailEventBytes(data, plaintextBytes);
  if (bytes <= MAX_EVENT_BYTES) return;
  throw new RelayError(
    'message_too_large',
    `body: this email would be stored as ${bytes.toLocaleString('en-US')} bytes, over the ${MAX_EVENT_BYTES / (1024 * 1024)} MiB an email may take ` +
      'once its bodies are rendered (template variables repeated), written as JSON (a control character takes 6 bytes) and sealed (base64)',
    { eventBytes: bytes, limitBytes: MAX_EVENT_BYTES },
  );
}
