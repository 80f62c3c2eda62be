// Code blocks of the project's documentation, for tests that run what the documentation
// prints exactly as printed.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** docs/<name>, read from the repository. */
export function readDoc(path: string): string {
  return readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), 'utf8');
}

/** The bodies of the ```<language> blocks under the heading `## <section>` (up to the next `## `), in order. */
export function blocksUnder(markdown: string, section: string, language: string): string[] {
  const start = markdown.indexOf(`\n## ${section}\n`);
  if (start < 0) throw new Error(`no section "## ${section}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  const body = markdown.slice(start, end < 0 ? undefined : end);
  return [...body.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]);
}

/** The ```js block whose first line is `// <file>` (the file the documentation asks you to save). */
export function jsFile(markdown: string, file: string): string {
  const block = [...markdown.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.startsWith(`// ${file}`));
  if (!block) throw new Error(`no \`\`\`js block starting with "// ${file}"`);
  return block;
}
