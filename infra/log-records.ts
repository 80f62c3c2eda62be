// Checks every Log adapter makes on records before publishing, so that a bad record fails
// the same way (TypeError, nothing written) whichever log runs.
import type { OutgoingRecord } from './ports/log.ts';

export function checkOutgoingRecords(records: OutgoingRecord[]): void {
  for (const record of records) {
    if (typeof record.key !== 'string') throw new TypeError('record key must be a string');
    if (typeof record.value !== 'string') throw new TypeError('record value must be a string');
    for (const [name, value] of Object.entries(record.headers ?? {})) {
      if (typeof value !== 'string') throw new TypeError(`header ${name} must be a string`);
    }
  }
}
