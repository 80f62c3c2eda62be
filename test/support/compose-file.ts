// Reading infra/compose without Docker: the YAML that compose.yaml is written in, compose's
// variable interpolation, the Dockerfile's instructions and .dockerignore's patterns.
//
// The YAML reader takes only the subset compose.yaml uses (block mappings and sequences,
// single-line flow collections, quoted and plain scalars, comments, anchors, aliases and `<<`
// merges) and throws on anything else, so a construct it does not know fails the test
// instead of being misread. Scalars stay strings (compose passes environment values as text).

export type YamlValue = string | null | YamlValue[] | { [key: string]: YamlValue };
type YamlMap = { [key: string]: YamlValue };

interface Line { indent: number; text: string; number: number }

/** The line without its comment: `#` at the start or after a blank, outside quotes. */
function stripComment(line: string): string {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      if (i === 0 || /[\s[{,:]/.test(line[i - 1])) quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) {
      return line.slice(0, i);
    }
  }
  return line;
}

export function readYaml(text: string): YamlValue {
  const lines: Line[] = [];
  text.split('\n').forEach((raw, index) => {
    if (raw.includes('\t')) throw new Error(`line ${index + 1}: tab characters are not YAML indentation`);
    const body = stripComment(raw).trimEnd();
    if (body.trim() === '' || body === '---') return;
    lines.push({ indent: body.length - body.trimStart().length, text: body.trim(), number: index + 1 });
  });
  const anchors = new Map<string, YamlValue>();
  let at = 0;

  const fail = (line: Line | undefined, message: string): never => {
    throw new Error(`line ${line?.number ?? 'end'}: ${message}`);
  };

  /** A value written on the line itself: alias, flow collection, quoted or plain scalar. */
  function inlineValue(source: string, line: Line): YamlValue {
    const value = source.trim();
    if (value.startsWith('*')) {
      if (!anchors.has(value.slice(1))) fail(line, `unknown alias ${value}`);
      return anchors.get(value.slice(1))!;
    }
    if (/^[|>]/.test(value)) fail(line, 'block scalars are outside the subset this reader takes');
    const flow = { text: value, at: 0 };
    const result = flowValue(flow, line, false);
    if (flow.text.slice(flow.at).trim() !== '') fail(line, `unexpected "${flow.text.slice(flow.at)}"`);
    return result;
  }

  function flowValue(flow: { text: string; at: number }, line: Line, inside: boolean): YamlValue {
    const skip = () => { while (flow.text[flow.at] === ' ') flow.at++; };
    skip();
    const c = flow.text[flow.at];
    if (c === '[' || c === '{') {
      const close = c === '[' ? ']' : '}';
      flow.at++;
      const list: YamlValue[] = [];
      const map: YamlMap = {};
      skip();
      while (flow.text[flow.at] !== close) {
        if (flow.at >= flow.text.length) fail(line, 'flow collections must end on their line');
        if (c === '[') list.push(flowValue(flow, line, true));
        else {
          const key = flowValue(flow, line, true);
          skip();
          if (flow.text[flow.at] !== ':') fail(line, 'a flow mapping entry needs "key: value"');
          flow.at++;
          map[String(key)] = flowValue(flow, line, true);
        }
        skip();
        if (flow.text[flow.at] === ',') flow.at++;
        else if (flow.text[flow.at] !== close) fail(line, `expected "," or "${close}"`);
        skip();
      }
      flow.at++;
      return c === '[' ? list : map;
    }
    if (c === '"') {
      const end = /^"((?:[^"\\]|\\.)*)"/.exec(flow.text.slice(flow.at));
      if (!end) fail(line, 'unterminated double-quoted string');
      flow.at += end![0].length;
      return JSON.parse(end![0]) as string;
    }
    if (c === "'") {
      const end = /^'((?:[^']|'')*)'/.exec(flow.text.slice(flow.at));
      if (!end) fail(line, 'unterminated single-quoted string');
      flow.at += end![0].length;
      return end![1].replace(/''/g, "'");
    }
    // Plain scalar: to the end, or (in a flow collection) to a "," "]" "}" or ": ".
    const rest = flow.text.slice(flow.at);
    const plain = inside ? /^(?:[^,\]}:]|:(?=[^\s,\]}]))*/.exec(rest)![0] : rest;
    flow.at += plain.length;
    const value = plain.trim();
    return value === '' || value === '~' || value === 'null' ? null : value;
  }

  /** "key: rest" → [key, rest]; the colon must be followed by a blank or end the line. */
  function splitKey(line: Line): [string, string] {
    const match = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s"'#][^:]*?|<<)\s*:(?:\s+(.*))?$/.exec(line.text);
    if (!match) fail(line, `expected "key: value", got "${line.text}"`);
    const key = match![1].startsWith('"') || match![1].startsWith("'") ? String(inlineValue(match![1], line)) : match![1];
    return [key, match![2] ?? ''];
  }

  /** The value after "key:" or "- ": on the line, or the block indented below it. */
  function valueAfter(rest: string, line: Line, parentIndent: number): YamlValue {
    let anchor: string | null = null;
    const anchored = /^&([A-Za-z0-9_-]+)(?:\s+(.*))?$/.exec(rest);
    if (anchored) {
      anchor = anchored[1];
      rest = anchored[2] ?? '';
    }
    let value: YamlValue;
    if (rest !== '') value = inlineValue(rest, line);
    else if (at < lines.length && lines[at].indent > parentIndent) value = block(lines[at].indent);
    else if (at < lines.length && lines[at].indent === parentIndent && lines[at].text.startsWith('- ')) value = block(parentIndent);
    else value = null;
    if (anchor) anchors.set(anchor, value);
    return value;
  }

  function block(indent: number): YamlValue {
    const first = lines[at];
    if (first.text === '-' || first.text.startsWith('- ')) {
      const list: YamlValue[] = [];
      while (at < lines.length && lines[at].indent === indent && (lines[at].text === '-' || lines[at].text.startsWith('- '))) {
        const line = lines[at++];
        const rest = line.text.slice(1).trim();
        if (/^[^\s"'[{][^:]*:(\s|$)/.test(rest)) fail(line, 'mappings inside a block sequence are outside the subset this reader takes');
        list.push(valueAfter(rest, line, indent));
      }
      if (at < lines.length && lines[at].indent > indent) fail(lines[at], 'unexpected indentation');
      return list;
    }
    const map: YamlMap = {};
    const merged: YamlMap[] = [];
    while (at < lines.length && lines[at].indent === indent) {
      const line = lines[at++];
      if (line.text.startsWith('- ')) fail(line, 'a sequence item where a mapping key was expected');
      const [key, rest] = splitKey(line);
      const value = valueAfter(rest, line, indent);
      if (key === '<<') {
        for (const source of Array.isArray(value) ? value : [value]) {
          if (source === null || typeof source !== 'object' || Array.isArray(source)) fail(line, '"<<" merges mappings only');
          merged.push(source as YamlMap);
        }
      } else {
        if (Object.hasOwn(map, key)) fail(line, `duplicate key "${key}"`);
        map[key] = value;
      }
    }
    if (at < lines.length && lines[at].indent > indent) fail(lines[at], 'unexpected indentation');
    // Keys written in the mapping win over merged ones, whatever their order.
    for (const source of merged) for (const [key, value] of Object.entries(source)) if (!Object.hasOwn(map, key)) map[key] = value;
    return map;
  }

  if (lines.length === 0) return null;
  const document = block(lines[0].indent);
  if (at < lines.length) fail(lines[at], 'text after the document');
  return document;
}

/**
 * Compose's interpolation of one value: $$ is a literal $, ${VAR}, $VAR, ${VAR:-default},
 * ${VAR-default}, ${VAR:+alt}, ${VAR+alt}; ${VAR:?message} and ${VAR?message} throw the
 * message when VAR is unset (or, with the colon, empty), as `docker compose` refuses to run.
 */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(/\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g, (_all, dollar, name, colon, op, arg, bare) => {
    if (dollar === '$') return '$';
    if (bare) return env[bare] ?? '';
    const current = env[name];
    const missing = colon ? !current : current === undefined;
    if (op === undefined) return current ?? '';
    if (op === '-') return missing ? arg : current!;
    if (op === '+') return missing ? '' : arg;
    if (missing) throw new Error(`${name}: ${arg}`);
    return current!;
  });
}

export interface DockerInstruction { keyword: string; args: string; line: number }

/** The Dockerfile's instructions, continuation lines joined and comments dropped. */
export function readDockerfile(text: string): DockerInstruction[] {
  const out: DockerInstruction[] = [];
  let pending: { text: string; line: number } | null = null;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (pending === null && (line === '' || line.startsWith('#'))) return;
    if (pending !== null && line.startsWith('#')) return;
    const joined = pending ? `${pending.text} ${line}` : line;
    const start = pending?.line ?? index + 1;
    if (joined.endsWith('\\')) {
      pending = { text: joined.slice(0, -1).trimEnd(), line: start };
      return;
    }
    pending = null;
    const match = /^(\S+)\s*(.*)$/.exec(joined)!;
    out.push({ keyword: match[1].toUpperCase(), args: match[2], line: start });
  });
  return out;
}

/** Sources and destination of a COPY instruction (flags such as --chown dropped). */
export function copyOperands(instruction: DockerInstruction): { sources: string[]; destination: string } {
  const words = instruction.args.startsWith('[') ? (JSON.parse(instruction.args) as string[]) : instruction.args.split(/\s+/);
  const operands = words.filter((w) => !w.startsWith('--'));
  return { sources: operands.slice(0, -1), destination: operands.at(-1)! };
}

/** Whether a path of the build context (relative, with "/") is excluded by .dockerignore. */
export function dockerIgnores(patterns: string, path: string): boolean {
  let ignored = false;
  for (const raw of patterns.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    const pattern = (negate ? line.slice(1) : line).replace(/^\/+|\/+$/g, '');
    const regex = new RegExp(`^${pattern.split(/(\*\*\/|\*\*|\*|\?)/).map((part) => (
      part === '**/' ? '(?:.*/)?' : part === '**' ? '.*' : part === '*' ? '[^/]*' : part === '?' ? '[^/]' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&')
    )).join('')}(?:/.*)?$`);
    if (regex.test(path)) ignored = !negate;
  }
  return ignored;
}
