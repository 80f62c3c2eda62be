import { Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
const H = Type.Record(Type.String({ pattern: '^(?![fF][rR][oO][mM])[A-Za-z0-9-]+$' }), Type.String({ maxLength: 3, errorMessage: 'val' }), { errorMessage: 'hdr', maxProperties: 2, additionalProperties: false });
const S = Type.Object({ from: Type.String({errorMessage:'mb'}), headers: Type.Optional(H), u: Type.Optional(Type.Union([Type.String({errorMessage:'s'}), Type.Array(Type.String(), {minItems:1})], {errorMessage:'union'})) }, { additionalProperties: false });
console.log(JSON.stringify(S.properties.headers));
const c = TypeCompiler.Compile(S);
for (const v of [{from:'a', headers:{From:'x'}}, {from:'a', headers:{'X-A':'toolong'}}, {from:'a', headers:{'a b':'x'}}, {from:'a', u: []}, {from:'a', u: 3}, {from:'a', u: ['a', 3]}]) {
  const e = c.Errors(v).First();
  console.log(JSON.stringify(v), c.Check(v), e && { type: e.type, path: e.path, msg: e.message, em: (e.schema as any).errorMessage });
}
