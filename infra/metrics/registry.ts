// A small metrics registry rendered in the Prometheus text exposition format (version 0.0.4):
// counters, gauges and histograms with fixed buckets, each with a fixed list of label names.
//
// Hot paths keep the child of each label set they use (`labels()` once, `inc()`/`observe()`
// many times): an increment or an observation then allocates nothing. `labels()` itself builds
// a lookup key, so it belongs where a label set is first met, not in a per-request loop.
// Values that are read rather than counted (offsets, queue sizes) are set by collectors that
// run before each rendering.

/** The media type of what `render()` returns. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Prometheus's default latency buckets, in seconds. */
export const DEFAULT_SECONDS_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** HELP text: backslash and line feed escaped. */
export const escapeHelp = (text: string): string => text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

/** A label value: backslash, double quote and line feed escaped. */
export const escapeLabelValue = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/** A sample value as the format writes it: +Inf, -Inf, NaN, or the decimal number. */
export function formatValue(value: number): string {
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return Number.isNaN(value) ? 'NaN' : String(value);
}

/**
 * `{a="x",b="y"}` for these names and values, or '' when there are none. A label whose value
 * is empty is left out: Prometheus treats an empty label as an absent one.
 */
function labelText(names: readonly string[], values: readonly string[]): string {
  const parts: string[] = [];
  for (let i = 0; i < names.length; i++) {
    if (values[i] !== '') parts.push(`${names[i]}="${escapeLabelValue(values[i])}"`);
  }
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

type MetricType = 'counter' | 'gauge' | 'histogram';

/** One child's state: a counter's or gauge's value, or a histogram's per-bucket counts, sum and count. */
export type ChildState = { value: number } | { counts: number[]; sum: number; count: number };

/**
 * A registry's children as plain data, to be rendered by another registry of the same families
 * (a worker thread's, shown on its process's page): counters and histograms add up, a gauge
 * set on one side only is shown as set.
 */
export type RegistrySnapshot = Array<{ name: string; children: Array<{ values: string[]; state: ChildState }> }>;

abstract class Family<C> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  abstract readonly type: MetricType;
  readonly #children = new Map<string, { values: readonly string[]; child: C }>();

  constructor(name: string, help: string, labelNames: readonly string[]) {
    if (!METRIC_NAME.test(name)) throw new TypeError(`"${name}" is not a valid metric name`);
    for (const label of labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith('__')) throw new TypeError(`"${label}" is not a valid label name (metric ${name})`);
    }
    if (new Set(labelNames).size !== labelNames.length) throw new TypeError(`metric ${name} repeats a label name`);
    this.name = name;
    this.help = help;
    this.labelNames = [...labelNames];
  }

  /** The child of one label set (created at its first use); keep it on hot paths. */
  labels(...values: string[]): C {
    if (values.length !== this.labelNames.length) {
      throw new TypeError(`metric ${this.name} takes ${this.labelNames.length} label values (${this.labelNames.join(', ')}), got ${values.length}`);
    }
    // The unit separator cannot be confused with label text worth keeping apart.
    const key = values.join('\u001f');
    let entry = this.#children.get(key);
    if (!entry) {
      entry = { values: [...values], child: this.newChild() };
      this.#children.set(key, entry);
    }
    return entry.child;
  }

  /** Forgets every label set (collectors call it before setting what they read now). */
  reset(): void {
    this.#children.clear();
  }

  protected abstract newChild(): C;
  protected abstract sampleLines(labels: (extra?: string) => string, child: C): string[];
  protected abstract stateOf(child: C): ChildState;
  /** Adds `state` to `child` (a snapshot's share of the same label set). */
  protected abstract absorb(child: C, state: ChildState): void;

  snapshot(): RegistrySnapshot[number] {
    return { name: this.name, children: [...this.#children.values()].map(({ values, child }) => ({ values: [...values], state: this.stateOf(child) })) };
  }

  /** The family's lines, with the children of other registries' snapshots of it added in. */
  render(others: RegistrySnapshot[number]['children'] = []): string {
    const lines = [`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`];
    let entries: Iterable<{ values: readonly string[]; child: C }> = this.#children.values();
    if (others.length > 0) {
      const merged = new Map<string, { values: readonly string[]; child: C }>();
      for (const [key, { values, child }] of this.#children) {
        const copy = this.newChild();
        this.absorb(copy, this.stateOf(child));
        merged.set(key, { values, child: copy });
      }
      for (const { values, state } of others) {
        if (values.length !== this.labelNames.length) continue;
        const key = values.join('\u001f');
        let entry = merged.get(key);
        if (!entry) merged.set(key, (entry = { values, child: this.newChild() }));
        this.absorb(entry.child, state);
      }
      entries = merged.values();
    }
    for (const { values, child } of entries) {
      const labels = (extra?: string) => {
        const base = labelText(this.labelNames, values);
        if (extra === undefined) return base;
        return base === '' ? `{${extra}}` : `${base.slice(0, -1)},${extra}}`;
      };
      lines.push(...this.sampleLines(labels, child));
    }
    return lines.join('\n');
  }
}

export class CounterChild {
  value = 0;
  /** Adds `by` (default 1); a counter never goes down. */
  inc(by = 1): void {
    if (!(by >= 0)) throw new RangeError(`a counter only goes up (got ${by})`);
    this.value += by;
  }
}

export class Counter extends Family<CounterChild> {
  readonly type = 'counter';
  protected newChild(): CounterChild {
    return new CounterChild();
  }
  protected stateOf(child: CounterChild): ChildState {
    return { value: child.value };
  }
  protected absorb(child: CounterChild, state: ChildState): void {
    if ('value' in state) child.value += state.value;
  }
  protected sampleLines(labels: () => string, child: CounterChild): string[] {
    return [`${this.name}${labels()} ${formatValue(child.value)}`];
  }
}

export class GaugeChild {
  value = 0;
  set(value: number): void {
    this.value = value;
  }
  inc(by = 1): void {
    this.value += by;
  }
  dec(by = 1): void {
    this.value -= by;
  }
}

export class Gauge extends Family<GaugeChild> {
  readonly type = 'gauge';
  protected newChild(): GaugeChild {
    return new GaugeChild();
  }
  protected stateOf(child: GaugeChild): ChildState {
    return { value: child.value };
  }
  protected absorb(child: GaugeChild, state: ChildState): void {
    if ('value' in state) child.value += state.value;
  }
  protected sampleLines(labels: () => string, child: GaugeChild): string[] {
    return [`${this.name}${labels()} ${formatValue(child.value)}`];
  }
}

export class HistogramChild {
  readonly #bounds: readonly number[];
  /** Observations per bucket (not cumulative: the rendering adds them up); the last is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }
}

export class Histogram extends Family<HistogramChild> {
  readonly type = 'histogram';
  readonly buckets: readonly number[];

  constructor(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]) {
    super(name, help, labelNames);
    if (labelNames.includes('le')) throw new TypeError(`histogram ${name} may not have a label named le`);
    if (buckets.length === 0 || buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= buckets[i - 1]))) {
      throw new TypeError(`histogram ${name}: buckets must be finite and increasing`);
    }
    this.buckets = [...buckets];
  }

  protected newChild(): HistogramChild {
    return new HistogramChild(this.buckets);
  }

  protected stateOf(child: HistogramChild): ChildState {
    return { counts: [...child.counts], sum: child.sum, count: child.count };
  }

  protected absorb(child: HistogramChild, state: ChildState): void {
    if (!('counts' in state) || state.counts.length !== child.counts.length) return;
    for (let i = 0; i < state.counts.length; i++) child.counts[i] += state.counts[i];
    child.sum += state.sum;
    child.count += state.count;
  }

  protected sampleLines(labels: (extra?: string) => string, child: HistogramChild): string[] {
    const lines: string[] = [];
    let cumulative = 0;
    for (let i = 0; i <= this.buckets.length; i++) {
      cumulative += child.counts[i];
      const le = i < this.buckets.length ? formatValue(this.buckets[i]) : '+Inf';
      lines.push(`${this.name}_bucket${labels(`le="${le}"`)} ${formatValue(cumulative)}`);
    }
    lines.push(`${this.name}_sum${labels()} ${formatValue(child.sum)}`, `${this.name}_count${labels()} ${formatValue(child.count)}`);
    return lines;
  }
}

type AnyFamily = Counter | Gauge | Histogram;

export class MetricsRegistry {
  readonly #families = new Map<string, AnyFamily>();
  readonly #collectors: Array<() => Promise<void> | void> = [];
  readonly #series = new Set<string>();

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.#add(new Counter(name, help, labelNames));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.#add(new Gauge(name, help, labelNames));
  }

  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = DEFAULT_SECONDS_BUCKETS): Histogram {
    return this.#add(new Histogram(name, help, labelNames, buckets));
  }

  /** Runs before each rendering, e.g. to set gauges from what a store says now. */
  collect(collector: () => Promise<void> | void): void {
    this.#collectors.push(collector);
  }

  /**
   * Every family in registration order, after running the collectors, with the children of
   * `others` (snapshots of registries of the same families) added in.
   */
  async render(others: RegistrySnapshot[] = []): Promise<string> {
    await Promise.all(this.#collectors.map((collect) => collect()));
    const extra = new Map<string, RegistrySnapshot[number]['children']>();
    for (const family of others.flat()) extra.set(family.name, [...(extra.get(family.name) ?? []), ...family.children]);
    return `${[...this.#families.values()].map((f) => f.render(extra.get(f.name))).join('\n')}\n`;
  }

  /** The children of every family as they stand (collectors are not run): for another registry's render. */
  snapshot(): RegistrySnapshot {
    return [...this.#families.values()].map((f) => f.snapshot()).filter((f) => f.children.length > 0);
  }

  #add<F extends AnyFamily>(family: F): F {
    // A histogram also writes name_bucket, name_sum and name_count: no two families may share a series name.
    const series = family.type === 'histogram' ? ['', '_bucket', '_sum', '_count'].map((s) => family.name + s) : [family.name];
    for (const name of series) {
      if (this.#series.has(name)) throw new Error(`metric ${family.name} collides with a registered metric (${name})`);
    }
    for (const name of series) this.#series.add(name);
    this.#families.set(family.name, family);
    return family;
  }
}
