// TypeBox pieces shared by the management plugins.
import { Type } from '@sinclair/typebox';

/** Every management id is [a-z0-9_] in practice; this is the spec's id rule, so templates' projectId fits too. */
export const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$' });

/** 1 to 100 characters; services trim and check again, so " " is refused too. */
export const Name = Type.String({ minLength: 1, maxLength: 100 });

export const Address = Type.String({ minLength: 3, maxLength: 254 });

export const Role = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('developer'), Type.Literal('viewer')]);
export const Environment = Type.Union([Type.Literal('development'), Type.Literal('production')]);
export const Permission = Type.Union([Type.Literal('email:send'), Type.Literal('email:read')]);
