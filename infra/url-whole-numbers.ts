// The whole-number options of a store URL (EventStoreDB's connection string, MongoDB's URL).
// Both clients read them with parseInt, which stops at the first character that is not a digit
// and takes no unit: "10s" is 10, "1e4" 1, "0x10" 0, "1.5" 1. Such a value is accepted and
// misread, so it is refused at start instead, saying what the client would have read.

/** What an option's number counts, and the least value its client takes. */
export interface WholeNumberOption {
  /** What the number counts, plural ("milliseconds"); '' for a number that counts nothing (a port). */
  unit: string;
  min: number;
  /** What `min` means when it is special (EventStoreDB's keep-alives: "-1: off"). */
  minMeans?: string;
}

/**
 * Why `value` (trimmed) is not a whole number from `spec.min` written as such, or null.
 * `reader` names who would misread it ("client", "driver").
 */
export function wholeNumberProblem(option: string, value: string, spec: WholeNumberOption, reader: string): string | null {
  const number = Number(value);
  if (/^-?\d+$/.test(value) && Number.isSafeInteger(number) && number >= spec.min) return null;
  const of = spec.unit ? ` of ${spec.unit}` : '';
  const expected = `${option}: expected a whole number${of} from ${spec.min}${spec.minMeans ? ` (${spec.minMeans})` : ''}, without a unit; got "${value}"`;
  const read = Number.parseInt(value, 10);
  return Number.isNaN(read) || String(read) === value ? expected : `${expected}, which the ${reader} would read as ${read}${spec.unit ? ` ${spec.unit}` : ''}`;
}
