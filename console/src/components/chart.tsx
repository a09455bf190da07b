/**
 * A stacked bar chart of counts per minute (the last hour), drawn as SVG with
 * attributes only (no inline styles, which the console's CSP forbids). Each bar
 * has a title with its numbers; the legend gives the totals as text.
 */
import type { MinuteCounts } from '../types.js';

const WIDTH = 600;
const HEIGHT = 100;

export function MinuteChart({ series, keys, label }: { series: MinuteCounts[]; keys: string[]; label: string }) {
  const totals = series.map((m) => keys.reduce((sum, k) => sum + (m.counts[k] ?? 0), 0));
  const max = Math.max(1, ...totals);
  const bar = WIDTH / Math.max(1, series.length);
  const sums = Object.fromEntries(keys.map((k) => [k, series.reduce((s, m) => s + (m.counts[k] ?? 0), 0)]));
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="none" role="img" aria-label={`${label}: ${keys.map((k) => `${sums[k]} ${k}`).join(', ')} in the last hour`}>
        {series.map((m, i) => {
          let y = HEIGHT;
          return (
            <g key={m.minute}>
              <title>{`${m.minute.slice(11)} UTC: ${keys.map((k) => `${m.counts[k] ?? 0} ${k}`).join(', ')}`}</title>
              <rect x={i * bar} y={0} width={bar} height={HEIGHT} fill="transparent" />
              {keys.map((k) => {
                const h = ((m.counts[k] ?? 0) / max) * (HEIGHT - 2);
                y -= h;
                return h > 0 ? <rect key={k} class={`c-${k}`} x={i * bar + 1} y={y} width={Math.max(1, bar - 2)} height={h} /> : null;
              })}
            </g>
          );
        })}
      </svg>
      <div class="ticks" aria-hidden="true">
        <span>{series[0]?.minute.slice(11)} UTC</span>
        <span>highest: {max} per minute</span>
        <span>now</span>
      </div>
      <figcaption>
        {label}:{' '}
        {keys.map((k) => (
          <span key={k} class="legend">
            <span class={`swatch c-${k}`} aria-hidden="true" /> {k.replace(/_/g, ' ')} {sums[k]}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
