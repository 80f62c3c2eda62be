// Strings whose minLength and maxLength count characters (code points) as the spec and JSON
// Schema do, where TypeBox's own Type.String counts UTF-16 units and would refuse a subject of
// 998 emoji. A TypeBox kind of its own, so every route schema and the compiled checkers of the
// send bodies use the same rule.
import { Kind, Type, TypeRegistry, type TUnsafe } from '@sinclair/typebox';
import { hasCharacterCountWithin } from '../../../domain/text.ts';

export interface TextOptions {
  minLength?: number;
  maxLength?: number;
  /** Tested as TypeBox tests `pattern` (no flags). */
  pattern?: string;
  /** The lengths apply to the value once surrounding whitespace is trimmed (spec: Mailbox). */
  lengthAfterTrim?: boolean;
  errorMessage?: string;
}

interface TextSchema extends TextOptions {
  [Kind]: 'Text';
}

const compiledPatterns = new Map<string, RegExp>();
const patternOf = (source: string) => {
  let regex = compiledPatterns.get(source);
  if (!regex) compiledPatterns.set(source, (regex = new RegExp(source)));
  return regex;
};

if (!TypeRegistry.Has('Text')) {
  TypeRegistry.Set<TextSchema>('Text', (schema, value) => {
    if (typeof value !== 'string') return false;
    if (schema.pattern !== undefined && !patternOf(schema.pattern).test(value)) return false;
    const counted = schema.lengthAfterTrim ? value.trim() : value;
    return hasCharacterCountWithin(counted, schema.minLength ?? 0, schema.maxLength ?? Infinity);
  });
}

/** A string schema whose length limits count characters, not UTF-16 units. */
export const Text = (options: TextOptions = {}): TUnsafe<string> => Type.Unsafe<string>({ [Kind]: 'Text', type: 'string', ...options });
