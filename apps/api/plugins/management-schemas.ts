// TypeBox pieces shared by the management plugins.
import { Type } from '@sinclair/typebox';
import { Text } from './text.schemas.ts';

/** Every management id is [a-z0-9_] in practice; this is the spec's id rule, so templates' projectId fits too. */
export const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$' });

/** No C0, DEL or C1 control characters (apps/services/management/names.ts says why). */
const NO_CONTROL_CHARACTERS = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';

/** 1 to 100 characters (code points: an emoji is one, see ./text.schemas.ts); services trim and check again, so " " is refused too. */
export const Name = Text({
  minLength: 1, maxLength: 100, pattern: NO_CONTROL_CHARACTERS,
  errorMessage: 'must be 1 to 100 characters without control characters',
});

export const Address = Type.String({
  minLength: 3, maxLength: 254, pattern: NO_CONTROL_CHARACTERS,
  errorMessage: 'must be an email address of 3 to 254 characters without control characters',
});

export const Role = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('developer'), Type.Literal('viewer')]);
export const Environment = Type.Union([Type.Literal('development'), Type.Literal('production')]);
export const Permission = Type.Union([Type.Literal('email:send'), Type.Literal('email:read')]);
