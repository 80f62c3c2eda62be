// The encoding that lets the MongoDB adapter store any JSON document, on MongoDB and on
// FerretDB v1. The port takes any JSON (an email's metadata is free-form), but the engines refuse
// or alter some of it:
// - keys containing '.' or beginning with '$' (FerretDB refuses them; MongoDB reads them as paths
//   and operators in queries and updates);
// - keys containing NUL (BSON cannot hold them), or another C0 control character, '"' or '\'
//   (FerretDB on PostgreSQL fails on them: "invalid input syntax for type json");
// - strings containing NUL (PostgreSQL's jsonb has no \u0000);
// - arrays directly inside arrays (FerretDB refuses them);
// - lone surrogates in keys and strings (BSON is UTF-8: the driver writes U+FFFD in their place).
// E = U+E000 (private use) is the escape character:
// - A key or string that needs it is stored as E followed by the text with each troublesome code
//   unit written as E and its four lower-case hex digits: for keys the characters above, '$' and
//   E itself; for strings NUL, E and lone surrogates. So "order.id" is stored as
//   "\uE000order\uE000002eid", "a\u0000b" as "\uE000a\uE0000000b". A key or string that begins
//   with E is encoded too (even when it needs nothing else), so that a stored leading E always
//   means "encoded"; an E elsewhere in ordinary text is stored as it is.
// - An array inside an array is stored as an object with the single key E holding its (encoded)
//   elements: [[1, 2]] is stored as [{"\uE000": [1, 2]}]. No encoded key is E alone (an encoded
//   key holds at least one escaped character), so the two cannot be confused.
// Everything else is stored as it is: the encoding is the identity for ordinary data, so documents
// stored before it read back unchanged, and Relay's own fields (plain names, ordinary values) keep
// their indexes and queries. Query values and field paths go through the same functions, so an
// equality on a string holding NUL finds it. What is not kept is the order between encoded and
// ordinary strings (an encoded one sorts by its escaped text); ranges and sorts remain a total
// order, which keyset paging needs. The one ambiguity is a string or key stored before this
// encoding existed that began with U+E000: it would be decoded; a private-use character at the
// start of a key or value was not worth a format stamp.
// Writes and reads first walk the document to ask whether anything needs changing, which
// allocates nothing; only a document that does is copied.

const E = '\uE000';
const E_CODE = 0xe000;
const DOLLAR = 0x24;

/** Code units a key cannot hold as they are (besides a leading '$'); the ones escaped in an encoded key. */
const KEY_UNSAFE = /[\u0000-\u001f".\\]/;
const KEY_ESCAPED = /[\u0000-\u001f".\\$\uE000]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const STRING_ESCAPED = /[\u0000\uE000]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const UNESCAPE = /\uE000([0-9a-f]{4})/g;

const escapeUnit = (unit: string): string => E + unit.charCodeAt(0).toString(16).padStart(4, '0');
const unescaped = (text: string): string => text.slice(1).replace(UNESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));

function keyNeedsEncoding(key: string): boolean {
  const first = key.charCodeAt(0);
  return first === DOLLAR || first === E_CODE || KEY_UNSAFE.test(key) || !key.isWellFormed();
}

function stringNeedsEncoding(text: string): boolean {
  return text.charCodeAt(0) === E_CODE || text.includes('\u0000') || !text.isWellFormed();
}

/** The key as stored. */
export function storedKey(key: string): string {
  return keyNeedsEncoding(key) ? E + key.replace(KEY_ESCAPED, escapeUnit) : key;
}

/** The string as stored (documents' values, _ids and query values alike). */
export function storedString(text: string): string {
  return stringNeedsEncoding(text) ? E + text.replace(STRING_ESCAPED, escapeUnit) : text;
}

/** A dotted field path as stored: each segment a key. */
export function storedPath(path: string): string {
  if (!path.split('.').some(keyNeedsEncoding)) return path;
  return path.split('.').map(storedKey).join('.');
}

/** A query value as stored: strings are encoded, other scalars are unchanged. */
export function storedScalar<V>(value: V): V {
  return (typeof value === 'string' ? storedString(value) : value) as V;
}

const decodedText = (text: string): string => (text.charCodeAt(0) === E_CODE ? unescaped(text) : text);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Sets an own property, `__proto__` included (an assignment would set the prototype instead). */
function put(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

function needsEncoding(value: unknown, inArray: boolean): boolean {
  if (typeof value === 'string') return stringNeedsEncoding(value);
  if (Array.isArray(value)) {
    if (inArray) return true;
    for (const element of value) if (needsEncoding(element, true)) return true;
    return false;
  }
  if (!isPlainObject(value)) return false;
  for (const key in value) if (keyNeedsEncoding(key) || needsEncoding(value[key], false)) return true;
  return false;
}

function encode(value: unknown, inArray: boolean): unknown {
  if (typeof value === 'string') return storedString(value);
  if (Array.isArray(value)) {
    const elements = value.map((element) => encode(element, true));
    return inArray ? { [E]: elements } : elements;
  }
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key in value) put(out, storedKey(key), encode(value[key], false));
  return out;
}

function needsDecoding(value: unknown): boolean {
  if (typeof value === 'string') return value.charCodeAt(0) === E_CODE;
  if (Array.isArray(value)) {
    for (const element of value) if (needsDecoding(element)) return true;
    return false;
  }
  if (!isPlainObject(value)) return false;
  for (const key in value) if (key.charCodeAt(0) === E_CODE || needsDecoding(value[key])) return true;
  return false;
}

function decode(value: unknown): unknown {
  if (typeof value === 'string') return decodedText(value);
  if (Array.isArray(value)) return value.map(decode);
  if (!isPlainObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.length === 1 && keys[0] === E && Array.isArray(value[E])) return (value[E] as unknown[]).map(decode);
  const out: Record<string, unknown> = {};
  for (const key of keys) put(out, decodedText(key), decode(value[key]));
  return out;
}

/** The document as stored: the same object when nothing in it needs encoding, else an encoded copy. */
export function toStored<D extends object>(doc: D): D {
  return needsEncoding(doc, false) ? (encode(doc, false) as D) : doc;
}

/** The document as written, from the stored one: the same object when nothing in it was encoded. */
export function fromStored<D>(doc: D): D {
  return needsDecoding(doc) ? (decode(doc) as D) : doc;
}
