// Text for the operator's terminal that came from outside Relay: customers' names, subjects,
// addresses and URLs, remote servers' replies, DNS answers, error messages made of any of these.
// A terminal acts on control characters (ESC and C1 sequences retitle it, rewrite what is on
// screen, write the clipboard), so they are shown escaped instead; line breaks are kept.

/** `text` with each control character other than a line feed written as `\xNN`. */
export const printable = (text: string): string =>
  text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
