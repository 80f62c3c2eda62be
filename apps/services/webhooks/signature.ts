// The spec's signature: HMAC-SHA256 keyed with the endpoint secret's literal UTF-8 bytes over
// `timestamp + "." + raw body`, sent as `Relay-Signature: v1=<64 lowercase hex>`, with the
// timestamp in seconds in `Relay-Timestamp`; both fresh on every attempt.
import { createHmac } from 'node:crypto';

export function signatureHeaders(secret: string, body: string, at: Date): { 'relay-timestamp': string; 'relay-signature': string } {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${timestamp}.${body}`, 'utf8').digest('hex');
  return { 'relay-timestamp': timestamp, 'relay-signature': `v1=${mac}` };
}
