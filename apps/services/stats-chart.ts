// The stats series as a line chart, rendered on the server as SVG (no chart library, nothing
// from elsewhere): GET /v1/projects/:projectId/stats/chart.svg, which the dashboard's Stats page
// shows as an image. Presentation attributes only (no style), every text escaped.
import type { ProjectStats, SeriesPoint } from './deliverability-stats.ts';

/** The lines drawn: an outcome, or several summed. */
export const CHART_LINES: ReadonlyArray<{ label: string; outcomes: ReadonlyArray<keyof SeriesPoint>; color: string; dash?: string }> = [
  { label: 'sent', outcomes: ['sent'], color: '#2563eb' },
  { label: 'delivered', outcomes: ['delivered'], color: '#16a34a' },
  { label: 'bounced', outcomes: ['hard_bounced', 'soft_bounced'], color: '#dc2626' },
  { label: 'complained', outcomes: ['complained'], color: '#9333ea', dash: '6 3' },
  { label: 'failed or rejected', outcomes: ['failed', 'rejected'], color: '#ea580c', dash: '2 3' },
];

const WIDTH = 960;
const HEIGHT = 320;
const PAD = { left: 56, right: 40, top: 40, bottom: 44 };

const escape = (text: string): string => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A round step for the value axis: 1, 2 or 5 times a power of ten. */
function niceStep(max: number, ticks: number): number {
  const raw = Math.max(1, max) / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
  return Math.max(1, step);
}

const periodLabel = (iso: string, granularity: ProjectStats['granularity']) =>
  granularity === 'hour' ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(0, 10);

export function renderStatsChart(stats: Pick<ProjectStats, 'series' | 'granularity' | 'from' | 'to'>): string {
  // One point per period (the series has every period when not grouped).
  const periods = [...new Set(stats.series.map((p) => p.period))].sort();
  const values = CHART_LINES.map((line) => periods.map((period) => stats.series
    .filter((p) => p.period === period)
    .reduce((sum, p) => sum + line.outcomes.reduce((n, o) => n + Number(p[o] ?? 0), 0), 0)));
  const max = Math.max(0, ...values.flat());
  const step = niceStep(max, 4);
  const top = Math.max(step, Math.ceil(max / step) * step);
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (periods.length <= 1 ? plotW / 2 : (i * plotW) / (periods.length - 1));
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const parts: string[] = [];
  const title = `Recipients per ${stats.granularity}, ${periodLabel(stats.from, stats.granularity)} to ${periodLabel(stats.to, stats.granularity)} (UTC)`;
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-labelledby="chart-title chart-desc" font-family="system-ui, sans-serif" font-size="12">`);
  parts.push(`<title id="chart-title">${escape(title)}</title>`);
  const totals = CHART_LINES.map((line, i) => `${line.label} ${values[i].reduce((a, b) => a + b, 0)}`).join(', ');
  parts.push(`<desc id="chart-desc">${escape(`Totals: ${totals}.`)}</desc>`);
  parts.push(`<rect x="0" y="0" width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`);
  // Value axis: gridlines and labels.
  for (let v = 0; v <= top; v += step) {
    parts.push(`<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e5e7eb"/>`);
    parts.push(`<text x="${PAD.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#374151">${v}</text>`);
  }
  // Period axis: at most 8 labels.
  const every = Math.max(1, Math.ceil(periods.length / 8));
  periods.forEach((period, i) => {
    if (i % every !== 0) return;
    parts.push(`<text x="${x(i).toFixed(1)}" y="${HEIGHT - PAD.bottom + 18}" text-anchor="middle" fill="#374151">${escape(periodLabel(period, stats.granularity))}</text>`);
  });
  parts.push(`<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${y(0)}" y2="${y(0)}" stroke="#6b7280"/>`);
  CHART_LINES.forEach((line, i) => {
    const points = values[i].map((v, j) => `${x(j).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${line.color}" stroke-width="2"${line.dash ? ` stroke-dasharray="${line.dash}"` : ''} points="${points}"><title>${escape(line.label)}</title></polyline>`);
  });
  // Legend along the top.
  let lx = PAD.left;
  for (const line of CHART_LINES) {
    parts.push(`<line x1="${lx}" x2="${lx + 18}" y1="16" y2="16" stroke="${line.color}" stroke-width="3"${line.dash ? ` stroke-dasharray="${line.dash}"` : ''}/>`);
    parts.push(`<text x="${lx + 24}" y="20" fill="#111827">${escape(line.label)}</text>`);
    lx += 40 + line.label.length * 7;
  }
  parts.push('</svg>');
  return parts.join('\n');
}
