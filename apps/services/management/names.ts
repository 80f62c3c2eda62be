// Names people give workspaces, projects and API keys. They end up in dashboards, logs and
// operators' terminals (`relay workspace activate` prints them), so control characters are
// refused: a name holding ESC sequences or CR/LF would otherwise rewrite what an operator sees.
import { validationError } from '../../../domain/errors.ts';
import { characterCount } from '../../../domain/text.ts';

export const MAX_NAME_LENGTH = 100;

/** C0 controls, DEL and C1 controls (Unicode category Cc). */
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

/** Trimmed; 1 to 100 characters (code points, domain/text.ts), no control characters. `field` names the input in the message. */
export function normalizeName(input: string, field = 'body.name'): string {
  const name = input.trim();
  const length = characterCount(name);
  if (length === 0 || length > MAX_NAME_LENGTH) throw validationError(`${field} must be 1 to ${MAX_NAME_LENGTH} characters (after trimming)`);
  if (CONTROL_CHARACTERS.test(name)) throw validationError(`${field} must not contain control characters (such as line breaks, tabs or escapes)`);
  return name;
}
