// A histogram per workload, written as exposition text by hand: prom-client builds and escapes the labels
// of every bucket line anew on each scrape, which for 1 000 workloads cost more than all other metrics
// together. Here a workload's label text is made once, when it is first observed.

/** A label value as the exposition formats want it: backslash, double quote and line feed escaped. */
export const escapeLabel = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

interface Series {
  readonly labels: string;
  /** Observations at or below each bucket's bound (cumulative when rendered). */
  readonly counts: number[];
  sum: number;
  count: number;
}

export class WorkloadHistogram {
  private readonly series = new Map<string, Series>();

  constructor(
    private readonly name: string,
    private readonly help: string,
    private readonly buckets: readonly number[],
    private readonly agent: string,
  ) {}

  observe(workload: string, value: number): void {
    let s = this.series.get(workload);
    if (!s) {
      s = { labels: `workload="${escapeLabel(workload)}",agent="${escapeLabel(this.agent)}"`, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(workload, s);
    }
    const i = this.buckets.findIndex((bound) => value <= bound);
    if (i >= 0) s.counts[i] += 1;
    s.sum += value;
    s.count += 1;
  }

  remove(workload: string): void {
    this.series.delete(workload);
  }

  /** The metric family as Prometheus text (also valid OpenMetrics): HELP, TYPE, then per workload its buckets, sum and count. */
  render(): string {
    const { name } = this;
    const bucketOf = this.buckets.map((bound) => `${name}_bucket{le="${bound}",`);
    let text = `# HELP ${name} ${this.help}\n# TYPE ${name} histogram`;
    for (const s of this.series.values()) {
      let cumulative = 0;
      for (let i = 0; i < bucketOf.length; i++) {
        cumulative += s.counts[i];
        text += `\n${bucketOf[i]}${s.labels}} ${cumulative}`;
      }
      text += `\n${name}_bucket{le="+Inf",${s.labels}} ${s.count}\n${name}_sum{${s.labels}} ${s.sum}\n${name}_count{${s.labels}} ${s.count}`;
    }
    return text;
  }
}
