// How the spec's limits count "characters": Unicode code points, as JSON Schema's minLength and
// maxLength do. JavaScript's `length` counts UTF-16 units, in which an emoji is two: a subject
// of 998 emoji has 998 characters and must be accepted.

/** Code points of `value`; a lone surrogate counts as one. */
export function characterCount(value: string): number {
  let pairs = 0;
  for (let i = 0; i < value.length - 1; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        pairs++;
        i++;
      }
    }
  }
  return value.length - pairs;
}

/**
 * min <= characterCount(value) <= max, without counting when the UTF-16 length settles it
 * (a code point is one or two units), so a 10 MB body of plain text costs nothing.
 */
export function hasCharacterCountWithin(value: string, min: number, max: number): boolean {
  if (value.length < min) return false;
  if (value.length <= max && value.length >= 2 * min) return true;
  const count = characterCount(value);
  return count >= min && count <= max;
}

/**
 * `value` cut to at most `maxUnits` UTF-16 units, never between the two halves of a surrogate
 * pair: a lone surrogate is no text a JSON receiver can store (RFC 7493 2.1; Python's sqlite3,
 * PostgreSQL's jsonb refuse it), and a cut reply or reason goes into events, webhooks and reads.
 */
export function cutText(value: string, maxUnits: number): string {
  if (value.length <= maxUnits) return value;
  const cut = value.slice(0, maxUnits);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/**
 * Strings in the order of their UTF-16 units: the same answer on every machine, where
 * `localeCompare` follows the process's locale (in Danish "aa" sorts after "z").
 */
export const compareText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
