// Text for the operator's terminal that came from outside Relay: customers' names, subjects,
// addresses and URLs, remote servers' replies, DNS answers, error messages made of any of these.
// A terminal acts on control characters (ESC and C1 sequences retitle it, rewrite what is on
// screen, write the clipboard), so they are shown escaped instead; line breaks are kept.
// Machine-readable output (--json, JSON lines, CSV) is often read on a terminal too.

/** `text` with each control character other than a line feed written as `\xNN`. */
export const printable = (text: string): string =>
  text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

/**
 * JSON.stringify, with DEL and the C1 controls also written as `\u00NN` (it escapes only C0):
 * the same value when parsed. They can only occur inside strings, where the escape is valid.
 */
export const printableJson = (value: unknown, space?: number): string =>
  JSON.stringify(value, null, space).replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
