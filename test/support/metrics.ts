// Scrapes /metrics over HTTP and reads the Prometheus text format back into samples, as a
// Prometheus server would: name, labels (escapes undone), value.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;

function unescape(value: string): string {
  return value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

export function parseMetrics(page: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of page.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    const text = match[2] ?? '';
    LABEL.lastIndex = 0;
    while (LABEL.lastIndex < text.length) {
      const label = LABEL.exec(text);
      if (!label) throw new Error(`bad labels in: ${line}`);
      labels[label[1]] = unescape(label[2]);
    }
    const raw = match[3];
    samples.push({ name: match[1], labels, value: raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw) });
  }
  return samples;
}

/** GET <baseUrl>/metrics; fails unless it answers 200 in the Prometheus text format. */
export async function scrape(baseUrl: string): Promise<Sample[]> {
  const response = await fetch(`${baseUrl}/metrics`);
  const body = await response.text();
  if (response.status !== 200) throw new Error(`GET /metrics answered ${response.status}: ${body}`);
  const type = response.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain; version=0.0.4')) throw new Error(`GET /metrics content-type: ${type}`);
  return parseMetrics(body);
}

/** The samples named `name` whose labels include `labels`. */
export const samplesOf = (samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

/** The sum of those samples' values (0 when there is none). */
export const sumOf = (samples: Sample[], name: string, labels: Record<string, string> = {}): number =>
  samplesOf(samples, name, labels).reduce((sum, s) => sum + s.value, 0);
