// The `_mta-sts` TXT record (RFC 8461 3.1), read here rather than by mailauth: its reader
// strips blanks with /[ \t]+$/, quadratic in a run of blanks inside a field, and a recipient
// domain's owner writes the record (one TXT record can hold close to 64 KiB). This reader
// splits and trims by hand, and a record longer than MAX_STS_RECORD_LENGTH (real ones are a few
// dozen characters) is invalid before any of it is read.

/** Longer records are invalid. */
export const MAX_STS_RECORD_LENGTH = 1024;

/**
 * What the TXT records at `_mta-sts.<domain>` say: no MTA-STS record, a policy id, a record that
 * is not valid (the domain has no available policy either, RFC 8461 3.1), or several records,
 * which is not one policy.
 */
export type StsRecord = { kind: 'none' } | { kind: 'id'; id: string } | { kind: 'invalid' } | { kind: 'several'; count: number };

// Anchored, without nested repetition: linear whatever the record holds.
const STS_RECORD_START = /^v=STSv1[ \t]*;/;
const STS_ID = /^[A-Za-z0-9]{1,32}$/;
const STS_EXT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/;
const STS_EXT_VALUE = /^[\x21-\x3a\x3c\x3e-\x7e]+$/;

/** `text` without the SP and HTAB at either end (the blanks RFC 8461 lets a delimiter carry). */
function stripBlanks(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text[start] === ' ' || text[start] === '\t')) start++;
  while (end > start && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/** The policy id of one record that begins with "v=STSv1;", or null when it is not valid. */
export function stsPolicyId(record: string): string | null {
  if (record.length > MAX_STS_RECORD_LENGTH) return null;
  const fields = record.split(';').map(stripBlanks);
  if (fields[0] !== 'v=STSv1') return null;
  if (fields.length > 2 && fields.at(-1) === '') fields.pop(); // the optional trailing delimiter
  let id: string | null = null;
  for (const field of fields.slice(1)) {
    const eq = field.indexOf('=');
    if (eq < 1) return null;
    const name = field.slice(0, eq);
    const value = field.slice(eq + 1);
    if (name === 'id') {
      if (!STS_ID.test(value)) return null;
      id ??= value; // the first id stands; a repeated one need only be well formed
    } else if (!STS_EXT_NAME.test(name) || !STS_EXT_VALUE.test(value)) {
      return null;
    }
  }
  return id;
}

/** RFC 8461 3.1: the records that do not begin with "v=STSv1;" are left out, and only one may be left. */
export function readStsRecords(records: readonly string[]): StsRecord {
  const sts = records.filter((record) => STS_RECORD_START.test(record));
  if (sts.length === 0) return { kind: 'none' };
  if (sts.length > 1) return { kind: 'several', count: sts.length };
  const id = stsPolicyId(sts[0]);
  return id === null ? { kind: 'invalid' } : { kind: 'id', id };
}
